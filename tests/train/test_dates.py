"""Date-format translation: the formats, their targets, and a split by date."""
import datetime

import numpy as np
import pytest

from attngraph.train.data import FORMATS, Dates, format_date

MAY_3_1979 = datetime.date(1979, 5, 3)


def test_the_formats_of_a_thursday_in_may():
    written = {format_date(MAY_3_1979, f) for f in FORMATS}
    assert {"3 May 1979", "05/03/79", "Thursday, May 3, 1979", "1979-05-03", "the 3rd of May 1979",
            "03.05.1979", "19790503", "may 3, 1979", "3 MAY 1979", "Thu, 3 May 1979", "3-May-79"} <= written
    assert len(written) == len(FORMATS) - 2        # "{d} {Mon}" and "{Mon} {d}," equal the full name for May


def test_ordinal_suffixes():
    days = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31]
    assert [format_date(datetime.date(2001, 1, d), "{dth}") for d in days] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"]


@pytest.mark.parametrize("template", FORMATS)
def test_every_format_tells_every_date_of_the_range_apart(template):
    first = datetime.date(1950, 1, 1)
    dates = [first + datetime.timedelta(int(n)) for n in np.random.default_rng(0).choice(36524, 3000, replace=False)]
    assert len({format_date(d, template) for d in dates}) == 3000


def test_pairs_map_to_iso_and_the_split_is_by_date():
    task = Dates()
    train, heldout = task.sample(2000, "train", seed=0), task.sample(500, "heldout", seed=0)
    for source, target in train[:200]:
        date = datetime.date.fromisoformat(target)
        assert source in {format_date(date, f) for f in FORMATS} and datetime.date(1950, 1, 1) <= date
    assert not {t for _, t in train} & {t for _, t in heldout}
    assert len({s for s, _ in train[:500]}) > 450            # formats and dates vary
    assert set("".join(s for s, _ in train)) <= set(task.alphabet)


def test_two_digit_years_need_less_than_a_century():
    with pytest.raises(ValueError, match="100 years"):
        Dates(start="1900-01-01", end="2049-12-31")
    assert Dates(start="1900-01-01", end="2049-12-31", formats=("{yyyy}{MM}{dd}",)).sample(1)
    with pytest.raises(ValueError, match="before start"):
        Dates(start="2000-01-02", end="2000-01-01")
