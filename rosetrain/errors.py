"""One error type for bad user input: the CLI prints its message, never a traceback."""


class RosetrainError(Exception):
    """A problem with the user's input (spec, recipe, data, predictions) or environment.

    The message must name what is wrong and where: the field, the file, the line.
    """
