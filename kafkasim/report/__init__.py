"""kafkasim: report."""
