"""The password-guess limit's schedule (app/ui/guesses.py) on a clock the test moves; the browser
test (tests/test_ui_signin_browser.py) checks it through a real dashboard."""

from __future__ import annotations

from app.ui.guesses import FORGET_S, FREE_GUESSES, LOCK_S, MAX_LOCK_S, Guesses, lock_s


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_five_free_guesses_then_a_wait_that_doubles() -> None:
    clock = Clock()
    guesses = Guesses(clock)
    for _ in range(FREE_GUESSES):
        assert guesses.wait_s("a") == 0
        guesses.wrong("a")
    assert guesses.wait_s("a") == LOCK_S and guesses.wait_s("b") == 0  # per address
    clock.now += LOCK_S
    assert guesses.wait_s("a") == 0
    guesses.wrong("a")
    assert guesses.wait_s("a") == 2 * LOCK_S
    assert lock_s(FREE_GUESSES + 20) == MAX_LOCK_S


def test_thirty_guesses_in_seven_seconds_are_not_possible() -> None:
    clock, checked = Clock(), 0
    guesses = Guesses(clock)
    for _ in range(30):  # one every 0.23 s: 30 in 7 s
        if guesses.wait_s("a") == 0:
            checked += 1
            guesses.wrong("a")
        clock.now += 7 / 30
    assert checked == FREE_GUESSES


def test_a_right_password_or_an_hour_of_quiet_clears_the_count() -> None:
    clock = Clock()
    guesses = Guesses(clock)
    for _ in range(FREE_GUESSES):
        guesses.wrong("a")
    guesses.right("a")
    assert guesses.wait_s("a") == 0
    for _ in range(FREE_GUESSES + 3):
        guesses.wrong("a")
    clock.now += FORGET_S + 1
    assert guesses.wait_s("a") == 0
    guesses.wrong("a")
    assert guesses.wait_s("a") == 0  # counting starts again
