"""Drafter training: self-distillation data (data.py) and the DFlash block loss (trainer.py)."""
