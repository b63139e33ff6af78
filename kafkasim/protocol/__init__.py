"""kafkasim: protocol."""
