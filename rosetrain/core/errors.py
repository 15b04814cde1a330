"""One error type for bad user input: the CLI prints its message, never a traceback."""


class RosetrainError(Exception):
    """A problem with the user's input (spec, recipe, data, predictions) or environment.

    The message must name what is wrong and where: the field, the file, the line,
    in the library's own terms (an argument or a config key, never a command-line
    flag: a caller of the Python API passed no flags). ``argument`` names the
    function argument at fault, where one is; the command line adds the option
    that sets it (``rosetrain.cli``).
    """

    def __init__(self, message: str = "", *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument  # kept through pickling (a worker's error): it is in __dict__


def first_line(err: BaseException) -> str:
    """The first line of a library's error message (or its type, when it has none),
    for a one-line RosetrainError that wraps it."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


MESSAGE_LIMIT = 600  # characters: an error names what is wrong and where, it never holds the data


def bounded(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` on one line and at most about ``limit`` characters: a long value
    (a 1 MB item id, 2,000 hue bands) is cut in the middle, with how much was cut,
    so the message keeps what it names first (file, line, field) and its end."""
    text = " ".join(text.split("\n")) if "\n" in text else text
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 6
    return f"{text[:head]} ...[{len(text) - head - tail:,} characters cut]... {text[-tail:]}"
