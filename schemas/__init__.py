"""The experiment format: pydantic models only, no torch, one small file per concept; slots.py
holds the open unions that registered blocks fill. Nothing is imported here."""
