"""Stage 1, config: a tier's YAML loaded and validated against its schema (`config`; the
schema made from the settings dataclasses: `tier`), the run
spec each job receives and its typed form (`specs`), and every report-level output path
(`artifacts`)."""
