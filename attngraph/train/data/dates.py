"""Date-format translation: a date written in one of many human-readable formats → ISO 8601.

    "3 May 1979", "05/03/79", "Thursday, May 3, 1979", "the 3rd of May 1979", "19790503", ... → "1979-05-03"

The task of Bahdanau-style attention tutorials: an encoder-decoder must learn where, in a source of
varying layout, the year, month and day are, and its attention map shows that alignment. Month and day
names are spelled here (never through the locale). Slashes are month/day/year (US) and dots day.month.year;
two-digit years are unambiguous because a task spans less than 100 years (by default 1950-2049). A date's
split is decided by the date itself, so a held-out date is never seen in training in any format.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from functools import cached_property

from ...errors import DataError
from .tasks import DIGITS, Task

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

FORMATS = (
    "{d} {Month} {yyyy}", "{dd} {Month} {yyyy}", "{d} {Mon} {yyyy}", "{d} {MONTH} {yyyy}",
    "{Month} {d}, {yyyy}", "{Mon} {d}, {yyyy}", "{month} {d}, {yyyy}", "{Month} {dth}, {yyyy}",
    "the {dth} of {Month} {yyyy}", "{Weekday}, {Month} {d}, {yyyy}", "{Weekday} {d} {Month} {yyyy}",
    "{Wkd}, {d} {Mon} {yyyy}", "{MM}/{dd}/{yy}", "{M}/{d}/{yy}", "{MM}/{dd}/{yyyy}", "{dd}.{MM}.{yyyy}",
    "{d}-{Mon}-{yy}", "{yyyy}-{MM}-{dd}", "{yyyy}/{MM}/{dd}", "{yyyy}{MM}{dd}",
)


def format_date(date: datetime.date, template: str) -> str:
    """``template`` with its fields filled in: d 3, dd 03, dth 3rd, M 5, MM 05, Month May, month may,
    MONTH MAY, Mon / MON the first three letters, Weekday Thursday, Wkd Thu, yy 79, yyyy 1979."""
    month, weekday = MONTHS[date.month - 1], WEEKDAYS[date.weekday()]
    return template.format(d=date.day, dd=f"{date.day:02}", dth=f"{date.day}{_ordinal_suffix(date.day)}",
                           M=date.month, MM=f"{date.month:02}", Month=month, month=month.lower(),
                           MONTH=month.upper(), Mon=month[:3], MON=month[:3].upper(), Weekday=weekday,
                           Wkd=weekday[:3], yy=f"{date.year % 100:02}", yyyy=f"{date.year:04}")


def _ordinal_suffix(day: int) -> str:
    """st, nd, rd or th: 1st 2nd 3rd 4th ... 11th 12th 13th ... 21st 22nd 23rd ... 31st"""
    return "th" if 11 <= day <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


@dataclass(frozen=True, kw_only=True)
class Dates(Task):
    """A date drawn uniformly from [start, end] written in a format drawn uniformly from ``formats``
    (templates of ``format_date``) → its ISO form yyyy-mm-dd."""

    start: str = "1950-01-01"
    end: str = "2049-12-31"
    formats: tuple[str, ...] = FORMATS
    name = "dates"

    def __post_init__(self):
        super().__post_init__()
        try:
            first, last = datetime.date.fromisoformat(self.start), datetime.date.fromisoformat(self.end)
        except (TypeError, ValueError):
            raise DataError(f"Dates: start and end must be dates written yyyy-mm-dd, got {self.start!r} and "
                            f"{self.end!r}") from None
        if last < first:
            raise DataError(f"Dates: end {self.end} is before start {self.start}")
        if not self.formats:
            raise DataError("Dates: give at least one format")
        for template in self.formats:
            try:
                format_date(first, template)
            except (KeyError, IndexError, ValueError) as e:
                raise DataError(f"Dates: the format {template!r} is not a template of format_date ({e!r}); its "
                                "fields are d dd dth M MM Month month MONTH Mon MON Weekday Wkd yy yyyy") from None
        if any("{yy}" in f for f in self.formats) and (last.year - first.year >= 100):
            raise DataError("Dates: two-digit years need a range shorter than 100 years")

    @cached_property
    def alphabet(self) -> str:
        """Every character the formats produce (a year of dates shows every month and weekday name) and
        the ISO targets' digits and dash."""
        year = [datetime.date(2001, 1, 1) + datetime.timedelta(days) for days in range(365)]
        return "".join(sorted(set(DIGITS + "-").union(*(format_date(d, f) for d in year for f in self.formats))))

    def pair(self, rng):
        first = datetime.date.fromisoformat(self.start)
        span = (datetime.date.fromisoformat(self.end) - first).days + 1
        date = first + datetime.timedelta(int(rng.integers(span)))
        return format_date(date, self.formats[rng.integers(len(self.formats))]), date.isoformat()

    def key(self, source, target):
        return target
