"""Stage 3, model: GPT-NeoX with the PPC head (`model`), position schemes and encodings
(`positions`), the model file every later stage reads (`modelfile`) and the transformers
equivalence (`hf`). Nothing here knows of DeepSpeed, Snakemake or MLflow."""
