"""kafkasim: runtime."""
