//! The proleptic Gregorian calendar under Go's time formats: the `metav1.MicroTime` of
//! audit events and the `http.TimeFormat` of `Last-Modified` both start from the civil date
//! of a day counted from 1970-01-01, as Go's `time.Time.date` computes it.

/// Year, month (1..=12) and day (1..=31) of the `days`th day after 1970-01-01
/// (Howard Hinnant's `civil_from_days`, for days on or after the epoch).
pub(crate) fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Days from 0000-03-01, so that a leap day ends its year; then 400-year eras.
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::civil_from_days;

    #[test]
    fn dates_across_leap_days_and_centuries() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        // 2000 is a leap year (divisible by 400), 2100 is not (divisible by 100).
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(47_540), (2100, 2, 28));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
        assert_eq!(civil_from_days(20_793), (2026, 12, 6));
        // 9999-12-31, the last day a MicroTime is written for.
        assert_eq!(civil_from_days(2_932_896), (9999, 12, 31));
    }
}
