//! The proleptic Gregorian calendar under Go's time formats: the `metav1.MicroTime` of
//! audit events and the `http.TimeFormat` of `Last-Modified` both start from the civil date
//! of a day counted from 1970-01-01, as Go's `time.Time.date` computes it.

use std::time::SystemTime;

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

/// `metav1.MicroTime`: RFC 3339 in UTC with six fractional digits
/// (`2026-12-06T14:02:03.123456Z`). A clock outside 1970..=9999 is written as the nearest
/// end of that range.
pub(crate) fn micro_time(out: &mut Vec<u8>, at: SystemTime) {
    const LAST: (u64, u32) = (253_402_300_799, 999_999);
    let (secs, micros) = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or((0, 0), |d| (d.as_secs(), d.subsec_micros()))
        .min(LAST);
    thread_local! {
        // The second last written, and its text up to the fraction: the events of a
        // request, and of the requests of one second, share it.
        static SECOND: std::cell::Cell<(u64, [u8; 27])> =
            const { std::cell::Cell::new((u64::MAX, [0; 27])) };
    }
    let mut text = SECOND.get();
    if text.0 != secs {
        let (year, month, day) = civil_from_days(secs / 86_400);
        let of_day = secs % 86_400;
        let mut fresh = *b"0000-00-00T00:00:00.000000Z";
        put_digits(&mut fresh[0..4], year);
        put_digits(&mut fresh[5..7], month);
        put_digits(&mut fresh[8..10], day);
        put_digits(&mut fresh[11..13], of_day / 3600);
        put_digits(&mut fresh[14..16], of_day / 60 % 60);
        put_digits(&mut fresh[17..19], of_day % 60);
        text = (secs, fresh);
        SECOND.set(text);
    }
    put_digits(&mut text.1[20..26], u64::from(micros));
    out.extend_from_slice(&text.1);
}

/// `value`'s last `digits.len()` decimal digits, zero-padded, into `digits`.
fn put_digits(digits: &mut [u8], mut value: u64) {
    for d in digits.iter_mut().rev() {
        *d = b'0' + (value % 10) as u8;
        value /= 10;
    }
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
