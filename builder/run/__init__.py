"""What a run is made of on disk and in YAML: experiment loading (config, validation), the run
directory (rundir) and atomic file writes (atomic). Imports only schemas and builder.errors."""
