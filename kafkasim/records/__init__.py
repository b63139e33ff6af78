"""kafkasim: records."""
