"""kafkasim: runtime/sim."""
