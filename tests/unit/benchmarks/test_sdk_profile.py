"""triton_kit.benchmarks.nmt.sdk_profile without a server: both clients run tritonclient's real
request building against the canned stub and read the same translation."""

from __future__ import annotations

from triton_kit.benchmarks.nmt import sdk_profile


def test_both_variants_answer_the_canned_translation() -> None:
    with sdk_profile.served_variants(None, beam=1) as variants:
        assert {name: call("one hundred") for name, call in variants.items()} == {
            "sdk": sdk_profile.TRANSLATION,
            "bare": sdk_profile.TRANSLATION,
        }
        spent = sdk_profile.cpu_per_call(variants, calls=20, rounds=2)
    assert set(spent) == {"sdk", "bare"}
    assert all(len(rounds) == 2 and min(rounds) >= 0 for rounds in spent.values())


def test_main_prints_each_variant(capsys) -> None:
    assert sdk_profile.main(["--calls", "20", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "canned (no server), beam 1" in out
    assert "sdk   median" in out and "bare  median" in out
