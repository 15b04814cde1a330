"""Models: tiny Qwen2-VL-family models built offline, and one loading path for
Hub ids, local folders and LoRA adapters (training and evaluation share it)."""
