"""What is shown to people: the terminal summary, run comparisons, HTML reports."""
