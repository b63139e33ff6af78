"""kafkasim: harness."""
