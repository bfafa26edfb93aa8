"""Stage 1, config: a tier's YAML loaded and validated against schema.yaml (`config`), the run
spec each job receives and its typed form (`specs`), and every report-level output path
(`artifacts`)."""
