"""check_delivery() (delivery.py), the judge of the engine and kernel tests,
refuses each kind of wrong delivery: loss, a duplicate, a reordering within
one sender, a stray datagram; and accepts two senders interleaved."""
import pytest

from delivery import check_delivery

A, B = ("10.0.0.1", 9), ("10.0.0.2", 9)
WANT = {A: [b"a1", b"a2", b"a3"], B: [b"b1"]}


def test_exact_delivery_passes():
    check_delivery([WANT], {A: [b"a1", b"a2", b"a3"], B: [b"b1"]})


def test_two_senders_interleaved_pass():
    other = {A: [b"x1", b"x2"]}
    check_delivery([WANT, other], {A: [b"x1", b"a1", b"a2", b"x2", b"a3"], B: [b"b1"]})


@pytest.mark.parametrize("got,words", [
    ({A: [b"a1", b"a3"], B: [b"b1"]}, "LOST 1 of 4"),
    ({A: [b"a1", b"a2", b"a3"]}, "LOST 1 of 4"),
    ({A: [b"a1", b"a2", b"a2", b"a3"], B: [b"b1"]}, "1 unexpected"),
    ({A: [b"a1", b"a3", b"a2"], B: [b"b1"]}, "1 members out of order"),
    ({A: [b"a1", b"a2", b"a3"], B: [b"b1", b"zz"]}, "nobody sent"),
    ({A: [b"a1", b"a2", b"a3"], B: [b"b1"], ("10.0.0.3", 9): [b"b1"]}, "nobody sent"),
])
def test_wrong_delivery_fails(got, words):
    with pytest.raises(AssertionError, match=words):
        check_delivery([WANT], got)


def test_order_across_senders_is_free_but_not_within():
    other = {A: [b"x1", b"x2"]}
    check_delivery([WANT, other], {A: [b"x1", b"x2", b"a1", b"a2", b"a3"], B: [b"b1"]})
    with pytest.raises(AssertionError, match="out of order"):
        check_delivery([WANT, other], {A: [b"x2", b"a1", b"x1", b"a2", b"a3"], B: [b"b1"]})
