"""tiny-model --out replaces only a model folder rosetrain wrote: a user's
folder or file there is refused before any work, and nothing is renamed aside."""

from __future__ import annotations

import pytest

from rosetrain.cli import main as cli_main


def test_a_users_folder_or_file_is_never_replaced(tmp_path, capsys):
    models = tmp_path / "models"
    models.mkdir()
    (models / "my-model.bin").write_bytes(b"weeks of training")
    assert cli_main(["tiny-model", "--out", str(models)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "my-model.bin" in err and "rosetrain did not write" in err
    assert err.rstrip().endswith("(option --out)")  # the CLI names its option; the library, its argument
    from rosetrain.core.errors import RosetrainError
    from rosetrain.models.tiny import build_tiny_model

    with pytest.raises(RosetrainError) as refused:
        build_tiny_model(models)
    assert refused.value.argument == "out_dir" and "--" not in str(refused.value)
    assert [p.name for p in models.iterdir()] == ["my-model.bin"]
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    assert cli_main(["tiny-model", "--out", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert afile.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models", "notes.txt"]  # no hidden .old copy


@pytest.mark.parametrize("extra", [False, True])
def test_a_folder_rosetrain_wrote_is_replaced_unless_the_user_added_to_it(tmp_path, capsys, extra):
    out = tmp_path / "tiny"
    assert cli_main(["tiny-model", "--out", str(out)]) == 0
    if extra:
        (out / "my-notes.md").write_text("mine")
    assert cli_main(["tiny-model", "--out", str(out), "--seed", "1"]) == (2 if extra else 0)
    if extra:
        assert "my-notes.md" in capsys.readouterr().err
        assert (out / "my-notes.md").read_text() == "mine"
