"""Models: tiny Qwen2-VL / Qwen3-VL models built offline, and one loading path for
Hub ids, local folders and LoRA adapters (training and evaluation share it)."""
