"""The end-to-end demo (base, SFT, GRPO, compare), its seed sweep and its report."""
