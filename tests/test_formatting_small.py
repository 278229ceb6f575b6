"""Small wordings of issue 39's point 9, each once seen printed wrong."""

from app.formatting import counted, overhead_text


def test_a_count_takes_its_noun_in_the_right_number():
    assert counted(1, "target") == "1 target"  # "Fleet · 1 targets"
    assert (counted(0, "target"), counted(3, "target"), counted(1200, "row")) == ("0 targets", "3 targets", "1,200 rows")


def test_traffic_below_the_models_bytes_is_not_a_negative_overhead():
    # "-1.28 GB/s per GPU beyond the model's bytes" once printed where the DRAM reading lagged
    text = overhead_text(-1.28, 0.97)
    assert "-" not in text and text.startswith("none: the GPUs moved 0.97× the model's bytes")
    assert overhead_text(3060.0, 5.6) == "3,060 GB/s per GPU beyond the model's bytes (5.6×)"
    assert overhead_text(None, 1.0) == ""


def test_status_spells_a_count_without_a_decimal():
    from app.commands.status import _format

    assert _format(524288.0, "tokens", 1.0) == "524,288 tokens"  # was "524288.0 tokens"
    assert _format(126.4, "tok/s", 1.0) == "126.4 tok/s" and _format(2.5, "s", 1.0) == "2.500 s"
