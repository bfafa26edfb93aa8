"""Stage 5, evaluate and analyse: length-sweep evaluation (`evaluate`, with greedy PPC decoding
in `decode`), perplexity (`perplexity`, Table 1), leave-one-out influential tokens
(`influence`, Figs. 4-6), attention diagnostics (`attention`) and the executable theory
(`theory`, `theory_cases`, Sec. 3-4)."""
