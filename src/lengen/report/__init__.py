"""Stage 6, figures and report: figures (`figures`), the claims report REPORT.md (`report`, with
its claim value types in `claims`) and the provenance stamped on every result (`provenance`)."""
