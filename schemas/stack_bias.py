"""A score bias owned by a stack and shared by its layers' self-attention (as T5's relative
position bias is): the base of its specs. aiayn ships none yet; a plugin may register one."""

from aiayn.schemas._base import Spec


class StackBiasSpec(Spec):
    """The base of a stack-level bias spec: a `type: Literal["name"]` field and its own fields.
    The block it builds is called as bias(T, S) -> (h or 1, T, S), added to the scores of every
    self-attention of the stack (queries are the last T of the S key positions)."""
