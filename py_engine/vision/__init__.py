"""The image side of vision-language models."""
