"""kafkasim: runtime/real."""
