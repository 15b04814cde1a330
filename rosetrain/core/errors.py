"""One error type for bad user input: the CLI prints its message, never a traceback."""


class RosetrainError(Exception):
    """A problem with the user's input (spec, recipe, data, predictions) or environment.

    The message must name what is wrong and where: the field, the file, the line.
    """


def first_line(err: BaseException) -> str:
    """The first line of a library's error message (or its type, when it has none),
    for a one-line RosetrainError that wraps it."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
