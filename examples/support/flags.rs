//! Command-line flags for the example gateway, parsed the way kube-apiserver parses its own
//! (spf13/pflag under cobra), plus the `--service-endpoints` file loader.
//!
//! The parser is table-driven. A [`FlagSet`] is a static list of [`FlagSpec`]s. Parsing
//! checks each value as it is read and records every occurrence. Typed reads then go
//! through [`ParsedFlags::get`]. To add a flag, add a row to `GATEWAY_FLAGS`, a field to
//! [`GatewayOptions`], and one `get` line in [`GatewayOptions::parse`].
//!
//! Accepted syntax, as in pflag: `--name=value` and `--name value`; `--flag` and
//! `--flag=true|false` for booleans (a bool never takes the next argument); shorthands such
//! as `-v 2`, `-v=2` and `-v2`; `_` written for `-` in names; `--` ends the flags. List flags
//! accept comma lists and repeats: the first use replaces the default and later uses append.
//! `--help` and `-h` give [`FlagError::Help`].

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A flag parsing failure. Its `Display` is one line that names the flag and the problem,
/// in pflag's wording where pflag has one (`unknown flag: --foo`,
/// `invalid argument "5x" for "--secure-port" flag: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FlagError {
    /// `--help` or `-h` was given. Print the usage and exit 0.
    Help,
    /// The command line is invalid. Print the message and exit 2.
    Invalid(String),
}

impl FlagError {
    /// The exit status a command-line program should use: 0 for help, 2 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            FlagError::Help => 0,
            FlagError::Invalid(_) => 2,
        }
    }

    fn bad_value(spec: &FlagSpec, value: &str, reason: &str) -> Self {
        FlagError::Invalid(format!(
            "invalid argument {value:?} for {:?} flag: {reason}",
            spec.display_name()
        ))
    }
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlagError::Help => f.write_str("flag: help requested"),
            FlagError::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for FlagError {}

/// How a flag takes its value from the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// `--x` means true; a value must be attached with `=`.
    Bool,
    /// One value, attached or in the next argument. The last use wins.
    Value,
    /// Comma-separated values; repeats append.
    List,
}

/// A type a flag can hold.
pub trait FlagValue: Sized {
    /// The type name shown in usage, as pflag shows it (`duration`, `ip`, `strings`...).
    const TYPE_NAME: &'static str;
    /// How the flag consumes arguments.
    const ARITY: Arity;
    /// Parses one occurrence. The error is the reason shown after `flag: `.
    fn parse_value(s: &str) -> Result<Self, String>;
    /// Combines all occurrences, or the default when none was given. Scalars keep the last.
    fn from_occurrences(values: &[String]) -> Result<Self, String> {
        Self::parse_value(values.last().map_or("", String::as_str))
    }
}

/// Go's strconv wording for an integer that failed to parse.
fn int_error(func: &str, s: &str) -> String {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let kind = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        "value out of range"
    } else {
        "invalid syntax"
    };
    format!("strconv.{func}: parsing {s:?}: {kind}")
}

impl FlagValue for bool {
    const TYPE_NAME: &'static str = "bool";
    const ARITY: Arity = Arity::Bool;
    fn parse_value(s: &str) -> Result<Self, String> {
        // The spellings Go's strconv.ParseBool accepts.
        match s {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
            _ => Err(format!("strconv.ParseBool: parsing {s:?}: invalid syntax")),
        }
    }
}

impl FlagValue for u16 {
    const TYPE_NAME: &'static str = "int";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        s.parse().map_err(|_| int_error("ParseInt", s))
    }
}

impl FlagValue for u32 {
    const TYPE_NAME: &'static str = "int";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        s.parse().map_err(|_| int_error("ParseInt", s))
    }
}

impl FlagValue for u8 {
    const TYPE_NAME: &'static str = "int";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        s.parse().map_err(|_| int_error("ParseInt", s))
    }
}

impl FlagValue for IpAddr {
    const TYPE_NAME: &'static str = "ip";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        s.trim()
            .parse()
            .map_err(|_| format!("failed to parse IP: {s:?}"))
    }
}

impl FlagValue for Duration {
    const TYPE_NAME: &'static str = "duration";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        parse_duration(s)
    }
}

impl FlagValue for String {
    const TYPE_NAME: &'static str = "string";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        Ok(s.to_owned())
    }
}

/// A required file or directory: empty is rejected.
impl FlagValue for PathBuf {
    const TYPE_NAME: &'static str = "string";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Err("must not be empty".to_owned());
        }
        Ok(PathBuf::from(s))
    }
}

/// An optional file or directory: empty means unset.
impl FlagValue for Option<PathBuf> {
    const TYPE_NAME: &'static str = "string";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        Ok((!s.is_empty()).then(|| PathBuf::from(s)))
    }
}

impl FlagValue for Vec<String> {
    const TYPE_NAME: &'static str = "strings";
    const ARITY: Arity = Arity::List;
    fn parse_value(s: &str) -> Result<Self, String> {
        // pflag's CSV reading turns an empty value into an empty list.
        Ok(if s.is_empty() {
            Vec::new()
        } else {
            s.split(',').map(str::to_owned).collect()
        })
    }
    fn from_occurrences(values: &[String]) -> Result<Self, String> {
        let mut all = Vec::new();
        for value in values {
            all.extend(Self::parse_value(value)?);
        }
        Ok(all)
    }
}

/// One row of a flag table.
#[derive(Debug, Clone, Copy)]
pub struct FlagSpec {
    /// Long name without dashes, e.g. `secure-port`.
    pub name: &'static str,
    /// One-letter alias used as `-x`.
    pub shorthand: Option<char>,
    /// Type name for usage.
    pub type_name: &'static str,
    /// How the flag takes its value.
    pub arity: Arity,
    /// The default, written as it would be on the command line (`30s`, `0.0.0.0`).
    pub default: &'static str,
    /// One-line help text.
    pub usage: &'static str,
    /// Whether parsing fails when the flag is absent.
    pub required: bool,
    check: fn(&str) -> Result<(), String>,
}

fn check_value<T: FlagValue>(s: &str) -> Result<(), String> {
    T::parse_value(s).map(|_| ())
}

impl FlagSpec {
    /// A flag holding a `T`.
    pub const fn of<T: FlagValue>(
        name: &'static str,
        default: &'static str,
        usage: &'static str,
    ) -> Self {
        FlagSpec {
            name,
            shorthand: None,
            type_name: T::TYPE_NAME,
            arity: T::ARITY,
            default,
            usage,
            required: false,
            check: check_value::<T>,
        }
    }

    /// Adds a one-letter alias.
    pub const fn shorthand(mut self, c: char) -> Self {
        self.shorthand = Some(c);
        self
    }

    /// Makes the flag mandatory.
    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The name as pflag prints it in errors: `--name` or `-v, --v`.
    fn display_name(&self) -> String {
        match self.shorthand {
            Some(c) => format!("-{c}, --{}", self.name),
            None => format!("--{}", self.name),
        }
    }
}

/// A program name and its flag table.
#[derive(Debug, Clone, Copy)]
pub struct FlagSet {
    /// The program name used in usage and errors.
    pub program: &'static str,
    /// The flags, in the order usage lists them.
    pub flags: &'static [FlagSpec],
}

/// What [`FlagSet::parse`] read: every occurrence of every flag, already type-checked.
#[derive(Debug, Clone)]
pub struct ParsedFlags {
    set: FlagSet,
    given: Vec<Vec<String>>,
}

impl FlagSet {
    /// Parses `args`, which must not include the program name (pass
    /// `std::env::args().skip(1)`).
    ///
    /// # Errors
    /// [`FlagError::Help`] for `--help`/`-h`. Otherwise [`FlagError::Invalid`] for an unknown
    /// flag, a missing or invalid value, a positional argument, or a missing required flag.
    pub fn parse(&self, args: impl IntoIterator<Item = String>) -> Result<ParsedFlags, FlagError> {
        let mut given = vec![Vec::new(); self.flags.len()];
        let mut positional = Vec::new();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "--" {
                positional.extend(args.by_ref());
            } else if let Some(long) = arg.strip_prefix("--") {
                self.parse_long(&arg, long, &mut args, &mut given)?;
            } else if arg.len() > 1 && arg.starts_with('-') {
                self.parse_shorthands(&arg[1..], &mut args, &mut given)?;
            } else {
                positional.push(arg);
            }
        }
        if !positional.is_empty() {
            let quoted: Vec<String> = positional.iter().map(|a| format!("{a:?}")).collect();
            return Err(FlagError::Invalid(format!(
                "{:?} does not take any arguments, got [{}]",
                self.program,
                quoted.join(" ")
            )));
        }
        let missing: Vec<&str> = self
            .flags
            .iter()
            .zip(&given)
            .filter(|(spec, values)| spec.required && values.is_empty())
            .map(|(spec, _)| spec.name)
            .collect();
        if !missing.is_empty() {
            return Err(FlagError::Invalid(format!(
                "required flag(s) \"{}\" not set",
                missing.join("\", \"")
            )));
        }
        Ok(ParsedFlags { set: *self, given })
    }

    fn parse_long(
        &self,
        arg: &str,
        long: &str,
        rest: &mut impl Iterator<Item = String>,
        given: &mut [Vec<String>],
    ) -> Result<(), FlagError> {
        if long.starts_with(['-', '=']) {
            return Err(FlagError::Invalid(format!("bad flag syntax: {arg}")));
        }
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (long, None),
        };
        let normalized = name.replace('_', "-");
        let Some(index) = self.flags.iter().position(|f| f.name == normalized) else {
            if name == "help" {
                return Err(FlagError::Help);
            }
            return Err(FlagError::Invalid(format!("unknown flag: --{name}")));
        };
        let spec = &self.flags[index];
        let value = match inline {
            Some(value) => value,
            None if spec.arity == Arity::Bool => "true".to_owned(),
            None => rest
                .next()
                .ok_or_else(|| FlagError::Invalid(format!("flag needs an argument: {arg}")))?,
        };
        record(spec, value, &mut given[index])
    }

    fn parse_shorthands(
        &self,
        cluster: &str,
        rest: &mut impl Iterator<Item = String>,
        given: &mut [Vec<String>],
    ) -> Result<(), FlagError> {
        let mut remaining = cluster;
        while let Some(c) = remaining.chars().next() {
            let after = &remaining[c.len_utf8()..];
            let Some(index) = self.flags.iter().position(|f| f.shorthand == Some(c)) else {
                if c == 'h' {
                    return Err(FlagError::Help);
                }
                return Err(FlagError::Invalid(format!(
                    "unknown shorthand flag: '{c}' in -{cluster}"
                )));
            };
            let spec = &self.flags[index];
            let value = if let Some(attached) = after.strip_prefix('=') {
                remaining = "";
                attached.to_owned()
            } else if spec.arity == Arity::Bool {
                remaining = after;
                "true".to_owned()
            } else if !after.is_empty() {
                remaining = "";
                after.to_owned()
            } else {
                remaining = "";
                rest.next().ok_or_else(|| {
                    FlagError::Invalid(format!("flag needs an argument: '{c}' in -{cluster}"))
                })?
            };
            record(spec, value, &mut given[index])?;
        }
        Ok(())
    }

    /// Usage text in pflag's layout: one line per flag with its type and non-empty default.
    pub fn usage(&self) -> String {
        let lefts: Vec<String> = self
            .flags
            .iter()
            .map(|f| {
                let short = f.shorthand.map_or("    ".to_owned(), |c| format!("-{c}, "));
                let ty = if f.arity == Arity::Bool {
                    String::new()
                } else {
                    format!(" {}", f.type_name)
                };
                format!("  {short}--{}{ty}", f.name)
            })
            .collect();
        let width = lefts.iter().map(String::len).max().unwrap_or(0) + 3;
        let mut out = format!("Usage:\n  {} [flags]\n\nFlags:\n", self.program);
        for (spec, left) in self.flags.iter().zip(lefts) {
            let default = match (spec.default, spec.type_name) {
                // pflag leaves zero-value defaults out.
                ("", _) | ("false", "bool") | ("0", "int") | ("0s", "duration") => String::new(),
                (d, "string") => format!(" (default {d:?})"),
                (d, "strings") => format!(" (default [{d}])"),
                (d, _) => format!(" (default {d})"),
            };
            let required = if spec.required { " (required)" } else { "" };
            out.push_str(&format!("{left:width$}{}{default}{required}\n", spec.usage));
        }
        out
    }
}

fn record(spec: &FlagSpec, value: String, into: &mut Vec<String>) -> Result<(), FlagError> {
    (spec.check)(&value).map_err(|reason| FlagError::bad_value(spec, &value, &reason))?;
    into.push(value);
    Ok(())
}

impl ParsedFlags {
    /// The typed value of flag `name`: the command-line occurrences, or the default.
    ///
    /// # Errors
    /// [`FlagError::Invalid`] when `name` is not in the table or the default does not parse
    /// as `T` (both mistakes in the table, not in the command line).
    pub fn get<T: FlagValue>(&self, name: &str) -> Result<T, FlagError> {
        let Some(index) = self.set.flags.iter().position(|f| f.name == name) else {
            return Err(FlagError::Invalid(format!("flag --{name} is not declared")));
        };
        let spec = &self.set.flags[index];
        let defaulted;
        let values = if self.given[index].is_empty() {
            defaulted = [spec.default.to_owned()];
            &defaulted[..]
        } else {
            &self.given[index][..]
        };
        T::from_occurrences(values).map_err(|reason| {
            FlagError::bad_value(spec, values.last().map_or("", String::as_str), &reason)
        })
    }

    /// Whether `name` appeared on the command line.
    pub fn changed(&self, name: &str) -> bool {
        let index = self.set.flags.iter().position(|f| f.name == name);
        index.is_some_and(|i| !self.given[i].is_empty())
    }
}

/// Parses a Go `time.ParseDuration` string: decimal numbers with optional fraction, each
/// followed by a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), e.g. `30s`, `1h30m`, `1.5h`,
/// `.5s`; a bare `0` is allowed. Fractions below one nanosecond are truncated.
///
/// # Errors
/// Go's messages (`time: invalid duration "x"`, `time: missing unit in duration "1"`,
/// `time: unknown unit "x" in duration "1x"`); values above Go's limit (about 292 years) are
/// invalid. A negative duration is rejected because every duration flag here is a period
/// or a timeout.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let nanos = parse_signed_duration(s)?;
    if nanos < 0 {
        return Err(format!("negative duration {s:?} is not allowed"));
    }
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("time: invalid duration {s:?}"))
}

/// A Go duration that may be negative (`--request-timeout` is validated after parsing, as
/// kube-apiserver does), in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoDuration(pub i64);

impl GoDuration {
    /// The duration, or `None` when negative.
    pub fn non_negative(self) -> Option<Duration> {
        u64::try_from(self.0).ok().map(Duration::from_nanos)
    }
}

impl FlagValue for GoDuration {
    const TYPE_NAME: &'static str = "duration";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        let n = parse_signed_duration(s)?;
        i64::try_from(n)
            .map(GoDuration)
            .map_err(|_| format!("time: invalid duration {s:?}"))
    }
}

impl FlagValue for i64 {
    const TYPE_NAME: &'static str = "int";
    const ARITY: Arity = Arity::Value;
    fn parse_value(s: &str) -> Result<Self, String> {
        s.parse().map_err(|_| int_error("ParseInt", s))
    }
}

/// [`parse_duration`] without the sign check, in nanoseconds.
fn parse_signed_duration(s: &str) -> Result<i128, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after) = rest.split_at(int_len);
        let (frac_digits, after) = match after.strip_prefix('.') {
            Some(frac) => frac.split_at(frac.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "" => return Err(format!("time: missing unit in duration {s:?}")),
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {s:?}")),
        };
        let whole: u128 = if int_digits.is_empty() {
            0
        } else {
            int_digits.parse().map_err(|_| invalid())?
        };
        // Digits past the 18th are below a nanosecond for every unit, so they can be dropped.
        let frac_digits = &frac_digits[..frac_digits.len().min(18)];
        let frac: u128 = if frac_digits.is_empty() {
            0
        } else {
            frac_digits.parse().map_err(|_| invalid())?
        };
        let scale = 10u128.pow(u32::try_from(frac_digits.len()).map_err(|_| invalid())?);
        total = whole
            .checked_mul(nanos_per_unit)
            .and_then(|n| n.checked_add(frac * nanos_per_unit / scale))
            .and_then(|n| n.checked_add(total))
            .filter(|n| *n <= i64::MAX as u128)
            .ok_or_else(invalid)?;
        rest = after;
    }
    let total = i128::try_from(total).map_err(|_| invalid())?;
    Ok(if negative { -total } else { total })
}

/// The authorization modes the gateway implements, in the spelling of kube-apiserver's
/// `--authorization-mode`.
pub const SUPPORTED_AUTHORIZATION_MODES: &[&str] = &["AlwaysAllow", "AlwaysDeny", "Webhook"];

/// kube-apiserver modes that are valid upstream but not implemented here yet.
const KNOWN_AUTHORIZATION_MODES: &[&str] = &["ABAC", "RBAC", "Node"];

#[rustfmt::skip]
const GATEWAY_FLAGS: &[FlagSpec] = &[
    FlagSpec::of::<IpAddr>("bind-address", "0.0.0.0",
        "The IP address on which to listen for the --secure-port port."),
    FlagSpec::of::<u16>("secure-port", "6443",
        "The port on which to serve HTTPS with authentication and authorization; 0 picks a free port."),
    FlagSpec::of::<PathBuf>("tls-cert-file", "",
        "File containing the PEM serving certificate, followed by any intermediates.").required(),
    FlagSpec::of::<PathBuf>("tls-private-key-file", "",
        "File containing the PEM private key matching --tls-cert-file.").required(),
    FlagSpec::of::<Option<PathBuf>>("client-ca-file", "",
        "PEM bundle of CAs whose client certificates authenticate users (CN = user, O = groups)."),
    FlagSpec::of::<Option<PathBuf>>("token-auth-file", "",
        "If set, the file that will be used to secure the secure port of the API server via token authentication."),
    FlagSpec::of::<bool>("anonymous-auth", "true",
        "Enables anonymous requests to the secure port. Requests that are not rejected by another authentication method are treated as anonymous requests (system:anonymous, group system:unauthenticated)."),
    FlagSpec::of::<Option<PathBuf>>("requestheader-client-ca-file", "",
        "Root certificate bundle to use to verify client certificates on incoming requests before trusting usernames in headers specified by --requestheader-username-headers."),
    FlagSpec::of::<Vec<String>>("requestheader-allowed-names", "",
        "List of client certificate common names to allow to provide usernames in headers specified by --requestheader-username-headers. If empty, any client certificate validated by the authorities in --requestheader-client-ca-file is allowed."),
    FlagSpec::of::<Vec<String>>("requestheader-username-headers", "",
        "List of request headers to inspect for usernames. X-Remote-User is common."),
    FlagSpec::of::<Vec<String>>("requestheader-uid-headers", "",
        "List of request headers to inspect for UIDs. X-Remote-Uid is suggested."),
    FlagSpec::of::<Vec<String>>("requestheader-group-headers", "",
        "List of request headers to inspect for groups. X-Remote-Group is suggested."),
    FlagSpec::of::<Vec<String>>("requestheader-extra-headers-prefix", "",
        "List of request header prefixes to inspect. X-Remote-Extra- is suggested."),
    FlagSpec::of::<Option<PathBuf>>("authentication-token-webhook-config-file", "",
        "File with webhook configuration for token authentication in kubeconfig format."),
    FlagSpec::of::<Duration>("authentication-token-webhook-cache-ttl", "2m",
        "The duration to cache responses from the webhook token authenticator."),
    FlagSpec::of::<Option<PathBuf>>("proxy-client-cert-file", "",
        "PEM client certificate the gateway presents to extension API servers."),
    FlagSpec::of::<Option<PathBuf>>("proxy-client-key-file", "",
        "PEM private key for --proxy-client-cert-file."),
    FlagSpec::of::<Option<PathBuf>>("apiservice-dir", "",
        "Directory of APIService manifests (YAML or JSON) to serve, re-read every --apiservice-dir-poll-interval."),
    FlagSpec::of::<Option<PathBuf>>("service-endpoints", "",
        "YAML or JSON list mapping each Service (namespace, name, port) to the host:port to dial."),
    FlagSpec::of::<Vec<String>>("authorization-mode", "AlwaysAllow",
        "Ordered list of plug-ins to authorize requests: AlwaysAllow, AlwaysDeny, Webhook."),
    FlagSpec::of::<Option<PathBuf>>("authorization-webhook-config-file", "",
        "File with webhook configuration in kubeconfig format, used with --authorization-mode=Webhook."),
    FlagSpec::of::<Duration>("authorization-webhook-cache-authorized-ttl", "5m",
        "The duration to cache 'authorized' responses from the webhook authorizer."),
    FlagSpec::of::<Duration>("authorization-webhook-cache-unauthorized-ttl", "30s",
        "The duration to cache 'unauthorized' responses from the webhook authorizer."),
    FlagSpec::of::<String>("authorization-webhook-version", "v1beta1",
        "The API version of the authorization.k8s.io SubjectAccessReview to send to and expect from the webhook."),
    FlagSpec::of::<Duration>("availability-resync-period", "30s",
        "How often every APIService's availability is re-checked."),
    FlagSpec::of::<Duration>("discovery-check-timeout", "5s",
        "Timeout of one availability (discovery) check."),
    FlagSpec::of::<Duration>("apiservice-dir-poll-interval", "2s",
        "How often --apiservice-dir is scanned for changes."),
    FlagSpec::of::<u8>("v", "0",
        "Number for the log level verbosity.").shorthand('v'),
    FlagSpec::of::<bool>("enable-http2", "true",
        "Offer HTTP/2 to clients and extension API servers."),
    FlagSpec::of::<GoDuration>("request-timeout", "1m0s",
        "An optional field indicating the duration a handler must keep a request open before timing it out. This is the default request timeout for requests but may be overridden by the ?timeout= query parameter."),
    FlagSpec::of::<i64>("min-request-timeout", "1800",
        "An optional field indicating the minimum number of seconds a handler must keep a request open before timing it out. Currently only honored by the watch request handler, which picks a randomized value above this number as the connection timeout, to spread out load."),
    FlagSpec::of::<i64>("max-requests-inflight", "400",
        "This and --max-mutating-requests-inflight are summed to determine the server's total concurrency limit. This flag is the maximum number of non-mutating requests in flight at a given time. 0 means no limit."),
    FlagSpec::of::<i64>("max-mutating-requests-inflight", "200",
        "The maximum number of mutating requests in flight at a given time. 0 means no limit."),
    FlagSpec::of::<i64>("max-requests-inflight-per-apiservice", "0",
        "The maximum number of requests in flight for any one APIService (group/version), so one slow extension server cannot take every slot. 0 means no limit. Not a kube-apiserver flag."),
    FlagSpec::of::<u32>("http2-max-streams-per-connection", "0",
        "The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection. Zero means to use the default (250)."),
];

/// The gateway's flag table.
pub const GATEWAY_FLAG_SET: FlagSet = FlagSet {
    program: "gateway",
    flags: GATEWAY_FLAGS,
};

/// The gateway's usage text, for `--help`.
pub fn usage() -> String {
    GATEWAY_FLAG_SET.usage()
}

/// The example gateway's options; field docs name the flag and the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayOptions {
    /// `--bind-address`, default `0.0.0.0` as in kube-apiserver.
    pub bind_address: IpAddr,
    /// `--secure-port`, default 6443. 0 asks the OS for a free port.
    pub secure_port: u16,
    /// `--tls-cert-file`, required: PEM serving certificate chain.
    pub tls_cert_file: PathBuf,
    /// `--tls-private-key-file`, required: PEM key of the serving certificate.
    pub tls_private_key_file: PathBuf,
    /// `--client-ca-file`: CAs for client-certificate authentication.
    pub client_ca_file: Option<PathBuf>,
    /// `--token-auth-file`: static bearer tokens, CSV `token,user,uid,"group1,group2"`.
    pub token_auth_file: Option<PathBuf>,
    /// `--anonymous-auth`, default true as kube-apiserver.
    pub anonymous_auth: bool,
    /// `--requestheader-client-ca-file`: CAs of front proxies allowed to assert identities.
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// `--requestheader-allowed-names`: front-proxy certificate CNs; empty allows any.
    pub requestheader_allowed_names: Vec<String>,
    /// `--requestheader-username-headers`.
    pub requestheader_username_headers: Vec<String>,
    /// `--requestheader-uid-headers`.
    pub requestheader_uid_headers: Vec<String>,
    /// `--requestheader-group-headers`.
    pub requestheader_group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`.
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// `--authentication-token-webhook-config-file`: kubeconfig of the TokenReview webhook.
    pub authentication_token_webhook_config_file: Option<PathBuf>,
    /// `--authentication-token-webhook-cache-ttl`, default 2m.
    pub authentication_token_webhook_cache_ttl: Duration,
    /// `--proxy-client-cert-file`: the gateway's client certificate towards backends.
    pub proxy_client_cert_file: Option<PathBuf>,
    /// `--proxy-client-key-file`: its key. Given together with the certificate or not at all.
    pub proxy_client_key_file: Option<PathBuf>,
    /// `--apiservice-dir`: APIService manifests to serve.
    pub apiservice_dir: Option<PathBuf>,
    /// `--service-endpoints`: file read by [`load_service_endpoints`].
    pub service_endpoints: Option<PathBuf>,
    /// `--authorization-mode`, default `[AlwaysAllow]`; each one of
    /// [`SUPPORTED_AUTHORIZATION_MODES`], no repeats.
    pub authorization_mode: Vec<String>,
    /// `--authorization-webhook-config-file`: kubeconfig of the SubjectAccessReview webhook.
    pub authorization_webhook_config_file: Option<PathBuf>,
    /// `--authorization-webhook-cache-authorized-ttl`, default 5m.
    pub authorization_webhook_cache_authorized_ttl: Duration,
    /// `--authorization-webhook-cache-unauthorized-ttl`, default 30s.
    pub authorization_webhook_cache_unauthorized_ttl: Duration,
    /// `--authorization-webhook-version`, `v1beta1` (kube-apiserver's default) or `v1`.
    pub authorization_webhook_version: String,
    /// `--availability-resync-period`, default 30s, greater than zero.
    pub availability_resync_period: Duration,
    /// `--discovery-check-timeout`, default 5s, greater than zero.
    pub discovery_check_timeout: Duration,
    /// `--apiservice-dir-poll-interval`, default 2s, greater than zero.
    pub apiservice_dir_poll_interval: Duration,
    /// `--v` / `-v`, log verbosity, default 0.
    pub v: u8,
    /// `--enable-http2`, default true.
    pub enable_http2: bool,
    /// `--http2-max-streams-per-connection`, default 0 (250).
    pub http2_max_streams_per_connection: u32,
    /// `--request-timeout`, default 1m: the deadline of requests that are not long-running.
    pub request_timeout: Duration,
    /// `--min-request-timeout`, default 1800 s. Upstream's watch handler reads it; the
    /// gateway serves no watches of its own (proxied watches end when the extension
    /// server ends them, as upstream), so it is validated and kept for compatibility.
    pub min_request_timeout: Duration,
    /// `--max-requests-inflight`, default 400; 0 no limit.
    pub max_requests_inflight: usize,
    /// `--max-mutating-requests-inflight`, default 200; 0 no limit.
    pub max_mutating_requests_inflight: usize,
    /// `--max-requests-inflight-per-apiservice`, default 0 (no limit).
    pub max_requests_inflight_per_apiservice: usize,
}

impl GatewayOptions {
    /// Parses the gateway's arguments (without the program name) and validates them.
    ///
    /// # Errors
    /// See [`FlagSet::parse`]. Also fails for an unknown, unsupported or repeated
    /// authorization mode, a proxy client certificate without its key (or the reverse), and a
    /// zero period or timeout.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<GatewayOptions, FlagError> {
        let f = GATEWAY_FLAG_SET.parse(args)?;
        let options = GatewayOptions {
            bind_address: f.get("bind-address")?,
            secure_port: f.get("secure-port")?,
            tls_cert_file: f.get("tls-cert-file")?,
            tls_private_key_file: f.get("tls-private-key-file")?,
            client_ca_file: f.get("client-ca-file")?,
            token_auth_file: f.get("token-auth-file")?,
            anonymous_auth: f.get("anonymous-auth")?,
            requestheader_client_ca_file: f.get("requestheader-client-ca-file")?,
            requestheader_allowed_names: f.get("requestheader-allowed-names")?,
            requestheader_username_headers: f.get("requestheader-username-headers")?,
            requestheader_uid_headers: f.get("requestheader-uid-headers")?,
            requestheader_group_headers: f.get("requestheader-group-headers")?,
            requestheader_extra_headers_prefix: f.get("requestheader-extra-headers-prefix")?,
            authentication_token_webhook_config_file: f
                .get("authentication-token-webhook-config-file")?,
            authentication_token_webhook_cache_ttl: f
                .get("authentication-token-webhook-cache-ttl")?,
            proxy_client_cert_file: f.get("proxy-client-cert-file")?,
            proxy_client_key_file: f.get("proxy-client-key-file")?,
            apiservice_dir: f.get("apiservice-dir")?,
            service_endpoints: f.get("service-endpoints")?,
            authorization_mode: f.get("authorization-mode")?,
            authorization_webhook_config_file: f.get("authorization-webhook-config-file")?,
            authorization_webhook_cache_authorized_ttl: f
                .get("authorization-webhook-cache-authorized-ttl")?,
            authorization_webhook_cache_unauthorized_ttl: f
                .get("authorization-webhook-cache-unauthorized-ttl")?,
            authorization_webhook_version: f.get("authorization-webhook-version")?,
            availability_resync_period: f.get("availability-resync-period")?,
            discovery_check_timeout: f.get("discovery-check-timeout")?,
            apiservice_dir_poll_interval: f.get("apiservice-dir-poll-interval")?,
            v: f.get("v")?,
            enable_http2: f.get("enable-http2")?,
            http2_max_streams_per_connection: f.get("http2-max-streams-per-connection")?,
            request_timeout: Duration::ZERO,
            min_request_timeout: Duration::ZERO,
            max_requests_inflight: 0,
            max_mutating_requests_inflight: 0,
            max_requests_inflight_per_apiservice: 0,
        };
        // kube-apiserver's ServerRunOptions.Validate, with its messages.
        let invalid = |m: &str| FlagError::Invalid(m.to_owned());
        let mut options = options;
        options.request_timeout = f
            .get::<GoDuration>("request-timeout")?
            .non_negative()
            .ok_or_else(|| invalid("--request-timeout can not be negative value"))?;
        let non_negative = |name: &str| -> Result<usize, FlagError> {
            let v: i64 = f.get(name)?;
            usize::try_from(v)
                .map_err(|_| FlagError::Invalid(format!("--{name} can not be negative value")))
        };
        options.min_request_timeout =
            Duration::from_secs(non_negative("min-request-timeout")? as u64);
        options.max_requests_inflight = non_negative("max-requests-inflight")?;
        options.max_mutating_requests_inflight = non_negative("max-mutating-requests-inflight")?;
        options.max_requests_inflight_per_apiservice =
            non_negative("max-requests-inflight-per-apiservice")?;
        options.validate()?;
        Ok(options)
    }

    /// `--bind-address` and `--secure-port` together.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.secure_port)
    }

    fn validate(&self) -> Result<(), FlagError> {
        let invalid = |m: String| Err(FlagError::Invalid(m));
        if self.authorization_mode.is_empty() {
            return invalid("at least one authorization-mode must be passed".to_owned());
        }
        for (i, mode) in self.authorization_mode.iter().enumerate() {
            if self.authorization_mode[..i].contains(mode) {
                return invalid(format!(
                    "authorization-mode {mode:?} has mode specified more than once"
                ));
            }
            if KNOWN_AUTHORIZATION_MODES.contains(&mode.as_str()) {
                return invalid(format!(
                    "authorization-mode {mode:?} is not supported by this gateway (supported: {})",
                    SUPPORTED_AUTHORIZATION_MODES.join(", ")
                ));
            }
            if !SUPPORTED_AUTHORIZATION_MODES.contains(&mode.as_str()) {
                return invalid(format!("authorization-mode {mode:?} is not a valid mode"));
            }
        }
        // As kube-apiserver: the webhook mode needs its configuration file.
        if self.authorization_mode.iter().any(|m| m == "Webhook")
            && self.authorization_webhook_config_file.is_none()
        {
            return invalid(
                "authorization-mode Webhook's authorization config file not passed (--authorization-webhook-config-file)"
                    .to_owned(),
            );
        }
        if !matches!(
            self.authorization_webhook_version.as_str(),
            "v1" | "v1beta1"
        ) {
            return invalid(format!(
                "--authorization-webhook-version: unsupported version {:?} (v1 or v1beta1)",
                self.authorization_webhook_version
            ));
        }
        if self.proxy_client_cert_file.is_some() != self.proxy_client_key_file.is_some() {
            return invalid(
                "--proxy-client-cert-file and --proxy-client-key-file must be given together"
                    .to_owned(),
            );
        }
        for (name, value) in [
            (
                "availability-resync-period",
                self.availability_resync_period,
            ),
            ("discovery-check-timeout", self.discovery_check_timeout),
            (
                "apiservice-dir-poll-interval",
                self.apiservice_dir_poll_interval,
            ),
        ] {
            if value.is_zero() {
                return invalid(format!("--{name} must be greater than zero"));
            }
        }
        Ok(())
    }
}

impl Default for GatewayOptions {
    /// The flag defaults, with empty certificate paths (which `parse` never returns).
    fn default() -> Self {
        GatewayOptions {
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            secure_port: 6443,
            tls_cert_file: PathBuf::new(),
            tls_private_key_file: PathBuf::new(),
            client_ca_file: None,
            token_auth_file: None,
            anonymous_auth: true,
            requestheader_client_ca_file: None,
            requestheader_allowed_names: Vec::new(),
            requestheader_username_headers: Vec::new(),
            requestheader_uid_headers: Vec::new(),
            requestheader_group_headers: Vec::new(),
            requestheader_extra_headers_prefix: Vec::new(),
            authentication_token_webhook_config_file: None,
            authentication_token_webhook_cache_ttl: Duration::from_secs(120),
            proxy_client_cert_file: None,
            proxy_client_key_file: None,
            apiservice_dir: None,
            service_endpoints: None,
            authorization_mode: vec!["AlwaysAllow".to_owned()],
            authorization_webhook_config_file: None,
            authorization_webhook_cache_authorized_ttl: Duration::from_secs(300),
            authorization_webhook_cache_unauthorized_ttl: Duration::from_secs(30),
            authorization_webhook_version: "v1beta1".to_owned(),
            availability_resync_period: Duration::from_secs(30),
            discovery_check_timeout: Duration::from_secs(5),
            apiservice_dir_poll_interval: Duration::from_secs(2),
            v: 0,
            enable_http2: true,
            http2_max_streams_per_connection: 0,
            request_timeout: Duration::from_secs(60),
            min_request_timeout: Duration::from_secs(1800),
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            max_requests_inflight_per_apiservice: 0,
        }
    }
}

/// Where to dial one Service port: the gateway's stand-in for Service + Endpoints lookups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEndpoint {
    /// Service namespace (a DNS-1123 label).
    pub namespace: String,
    /// Service name (a DNS-1035 label).
    pub name: String,
    /// The Service port an APIService's `spec.service.port` refers to; default 443 as there.
    pub port: u16,
    /// The `host:port` to connect to; IPv6 hosts in brackets.
    pub address: String,
}

const ENDPOINT_FIELDS: &[&str] = &["namespace", "name", "port", "address"];

/// Reads a `--service-endpoints` file: a top-level list of `{namespace, name, port, address}`
/// maps. A `.json` file is read as JSON and anything else as YAML. An empty file is an empty
/// list.
///
/// # Errors
/// One line naming the file and, for a bad entry, its zero-based index and the field, e.g.
/// `services.yaml: entry 2: address "foo" is not host:port`. Unknown fields and duplicate
/// (namespace, name, port) entries are errors.
pub fn load_service_endpoints(path: &Path) -> Result<Vec<ServiceEndpoint>, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
    let json = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    parse_service_endpoints(&text, json).map_err(|e| format!("{file}: {e}"))
}

fn parse_service_endpoints(text: &str, json: bool) -> Result<Vec<ServiceEndpoint>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let document: serde_json::Value = if json {
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| format!("invalid YAML: {e}"))?
    };
    let entries = match document {
        serde_json::Value::Array(entries) => entries,
        serde_json::Value::Null => Vec::new(),
        _ => return Err("expected a list of service endpoints at the top level".to_owned()),
    };
    let mut out: Vec<ServiceEndpoint> = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let endpoint = parse_endpoint(entry).map_err(|e| format!("entry {index}: {e}"))?;
        if let Some(first) = out.iter().position(|o| {
            (&o.namespace, &o.name, o.port) == (&endpoint.namespace, &endpoint.name, endpoint.port)
        }) {
            return Err(format!(
                "entry {index}: duplicate of entry {first} ({}/{} port {})",
                endpoint.namespace, endpoint.name, endpoint.port
            ));
        }
        out.push(endpoint);
    }
    Ok(out)
}

fn parse_endpoint(entry: &serde_json::Value) -> Result<ServiceEndpoint, String> {
    let map = entry
        .as_object()
        .ok_or("expected a mapping with namespace, name, port and address")?;
    if let Some(unknown) = map.keys().find(|k| !ENDPOINT_FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {unknown:?} (expected {})",
            ENDPOINT_FIELDS.join(", ")
        ));
    }
    let text = |field: &str| -> Result<String, String> {
        match map.get(field) {
            None | Some(serde_json::Value::Null) => Err(format!("{field} is required")),
            Some(serde_json::Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(other) => Err(format!("{field} must be a non-empty string, got {other}")),
        }
    };
    let namespace = text("namespace")?;
    if !is_dns_label(&namespace, false) {
        return Err(format!(
            "namespace {namespace:?} is not a valid DNS-1123 label"
        ));
    }
    let name = text("name")?;
    if !is_dns_label(&name, true) {
        return Err(format!("name {name:?} is not a valid DNS-1035 label"));
    }
    let port = match map.get("port") {
        None | Some(serde_json::Value::Null) => 443,
        Some(serde_json::Value::Number(n)) => n
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("port {n} is out of range (1-65535)"))?,
        Some(other) => return Err(format!("port must be an integer, got {other}")),
    };
    let address = text("address")?;
    check_host_port(&address)?;
    Ok(ServiceEndpoint {
        namespace,
        name,
        port,
        address,
    })
}

/// DNS-1123 label (or DNS-1035 when `letter_first`): 1-63 of `[a-z0-9-]`, alphanumeric ends.
fn is_dns_label(s: &str, letter_first: bool) -> bool {
    let bytes = s.as_bytes();
    let ok_char = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && bytes.iter().all(ok_char)
                && *first != b'-'
                && *last != b'-'
                && (!letter_first || first.is_ascii_lowercase())
        }
        _ => false,
    }
}

fn check_host_port(address: &str) -> Result<(), String> {
    let not_host_port = || format!("address {address:?} is not host:port");
    let (host, port) = address.rsplit_once(':').ok_or_else(not_host_port)?;
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => !host.is_empty() && !host.contains([':', '[', ']', '/', ' ']),
    };
    if !host_ok {
        return Err(not_host_port());
    }
    match port.parse::<u16>() {
        Ok(p) if p != 0 => Ok(()),
        _ => Err(format!(
            "address {address:?} has an invalid port {port:?} (1-65535)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    const CERTS: &[&str] = &["--tls-cert-file=c.pem", "--tls-private-key-file", "k.pem"];

    fn parse(extra: &[&str]) -> Result<GatewayOptions, FlagError> {
        GatewayOptions::parse(args(CERTS).into_iter().chain(args(extra)))
    }

    fn err(extra: &[&str]) -> String {
        parse(extra).expect_err("expected an error").to_string()
    }

    #[test]
    fn defaults_match_kube_apiserver_and_the_table() {
        let o = parse(&[]).expect("parse");
        let expected = GatewayOptions {
            tls_cert_file: "c.pem".into(),
            tls_private_key_file: "k.pem".into(),
            ..GatewayOptions::default()
        };
        assert_eq!(o, expected);
        assert_eq!(o.listen_addr().to_string(), "0.0.0.0:6443");
    }

    #[test]
    fn both_value_forms_and_every_flag_type() {
        let o = parse(&[
            "--bind-address",
            "127.0.0.1",
            "--secure-port=8443",
            "--client-ca-file",
            "ca.pem",
            "--proxy-client-cert-file=p.pem",
            "--proxy-client-key-file=p.key",
            "--apiservice-dir",
            "apis",
            "--service-endpoints=svc.yaml",
            "--authorization-mode=AlwaysDeny",
            "--availability-resync-period",
            "1m30s",
            "--discovery-check-timeout=500ms",
            "--apiservice-dir-poll-interval",
            "1.5s",
            "-v",
            "4",
            "--enable-http2=false",
        ])
        .expect("parse");
        assert_eq!(o.listen_addr().to_string(), "127.0.0.1:8443");
        assert_eq!(o.client_ca_file, Some(PathBuf::from("ca.pem")));
        assert_eq!(o.proxy_client_key_file, Some(PathBuf::from("p.key")));
        assert_eq!(o.apiservice_dir, Some(PathBuf::from("apis")));
        assert_eq!(o.service_endpoints, Some(PathBuf::from("svc.yaml")));
        assert_eq!(o.authorization_mode, ["AlwaysDeny"]);
        assert_eq!(o.availability_resync_period, Duration::from_secs(90));
        assert_eq!(o.discovery_check_timeout, Duration::from_millis(500));
        assert_eq!(o.apiservice_dir_poll_interval, Duration::from_millis(1500));
        assert_eq!((o.v, o.enable_http2), (4, false));
    }

    #[test]
    fn bools_and_shorthands_follow_pflag() {
        assert!(parse(&["--enable-http2"]).expect("parse").enable_http2);
        assert!(!parse(&["--enable-http2=F"]).expect("parse").enable_http2);
        assert_eq!(parse(&["-v=3"]).expect("parse").v, 3);
        assert_eq!(parse(&["-v7"]).expect("parse").v, 7);
        assert_eq!(
            parse(&["--v", "2", "--v=5"]).expect("parse").v,
            5,
            "last wins"
        );
        assert_eq!(parse(&["--secure_port=1"]).expect("parse").secure_port, 1);
        // A bool never takes the next argument, which is then a stray positional.
        assert_eq!(
            err(&["--enable-http2", "false"]),
            r#""gateway" does not take any arguments, got ["false"]"#
        );
        assert_eq!(
            err(&["--enable-http2=maybe"]),
            r#"invalid argument "maybe" for "--enable-http2" flag: strconv.ParseBool: parsing "maybe": invalid syntax"#
        );
    }

    #[test]
    fn list_flags_replace_the_default_then_append() {
        let o = parse(&["--authorization-mode", "AlwaysDeny,AlwaysAllow"]).expect("parse");
        assert_eq!(o.authorization_mode, ["AlwaysDeny", "AlwaysAllow"]);
        let f = GATEWAY_FLAG_SET
            .parse(args(CERTS).into_iter().chain(args(&[
                "--authorization-mode=a,b",
                "--authorization-mode",
                "c",
            ])))
            .expect("parse");
        assert_eq!(
            f.get::<Vec<String>>("authorization-mode").expect("get"),
            ["a", "b", "c"]
        );
        assert!(f.changed("authorization-mode") && !f.changed("v"));
    }

    #[test]
    fn errors_name_the_flag_in_pflag_wording() {
        assert_eq!(
            err(&["--secure-port=5x"]),
            r#"invalid argument "5x" for "--secure-port" flag: strconv.ParseInt: parsing "5x": invalid syntax"#
        );
        assert_eq!(
            err(&["--secure-port", "70000"]),
            r#"invalid argument "70000" for "--secure-port" flag: strconv.ParseInt: parsing "70000": value out of range"#
        );
        assert_eq!(err(&["--foo"]), "unknown flag: --foo");
        assert_eq!(err(&["--foo=1"]), "unknown flag: --foo");
        assert_eq!(err(&["-x"]), "unknown shorthand flag: 'x' in -x");
        assert_eq!(
            err(&["--secure-port"]),
            "flag needs an argument: --secure-port"
        );
        assert_eq!(err(&["-v"]), "flag needs an argument: 'v' in -v");
        assert_eq!(err(&["---x"]), "bad flag syntax: ---x");
        assert_eq!(
            err(&["-v", "x"]),
            r#"invalid argument "x" for "-v, --v" flag: strconv.ParseInt: parsing "x": invalid syntax"#
        );
        assert_eq!(
            err(&["--bind-address=nope"]),
            r#"invalid argument "nope" for "--bind-address" flag: failed to parse IP: "nope""#
        );
        assert_eq!(
            err(&["--discovery-check-timeout=5x"]),
            r#"invalid argument "5x" for "--discovery-check-timeout" flag: time: unknown unit "x" in duration "5x""#
        );
        assert_eq!(
            err(&["--tls-cert-file="]),
            r#"invalid argument "" for "--tls-cert-file" flag: must not be empty"#
        );
        assert_eq!(
            err(&["--", "--v=1"]),
            r#""gateway" does not take any arguments, got ["--v=1"]"#
        );
    }

    #[test]
    fn required_files_are_enforced() {
        let e = GatewayOptions::parse(args(&[]))
            .expect_err("missing")
            .to_string();
        assert_eq!(
            e,
            r#"required flag(s) "tls-cert-file", "tls-private-key-file" not set"#
        );
        let e = GatewayOptions::parse(args(&["--tls-cert-file=c"])).expect_err("missing");
        assert_eq!(
            e.to_string(),
            r#"required flag(s) "tls-private-key-file" not set"#
        );
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn timeout_and_inflight_flags_validate_as_kube_apiserver() {
        let o = parse(&[]).expect("defaults");
        assert_eq!(o.request_timeout, Duration::from_secs(60));
        assert_eq!(o.min_request_timeout, Duration::from_secs(1800));
        assert_eq!(
            (o.max_requests_inflight, o.max_mutating_requests_inflight),
            (400, 200)
        );
        assert_eq!(o.max_requests_inflight_per_apiservice, 0);
        let o = parse(&[
            "--request-timeout=30s",
            "--min-request-timeout=60",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight",
            "5",
            "--max-requests-inflight-per-apiservice=50",
        ])
        .expect("parse");
        assert_eq!(o.request_timeout, Duration::from_secs(30));
        assert_eq!(o.min_request_timeout, Duration::from_secs(60));
        assert_eq!(
            (o.max_requests_inflight, o.max_mutating_requests_inflight),
            (0, 5)
        );
        assert_eq!(o.max_requests_inflight_per_apiservice, 50);
        assert_eq!(
            err(&["--request-timeout=-1s"]),
            "--request-timeout can not be negative value"
        );
        assert_eq!(
            err(&["--min-request-timeout=-1"]),
            "--min-request-timeout can not be negative value"
        );
        assert_eq!(
            err(&["--max-requests-inflight=-1"]),
            "--max-requests-inflight can not be negative value"
        );
        assert_eq!(
            err(&["--max-mutating-requests-inflight=-2"]),
            "--max-mutating-requests-inflight can not be negative value"
        );
        assert_eq!(
            err(&["--request-timeout=5"]),
            r#"invalid argument "5" for "--request-timeout" flag: time: missing unit in duration "5""#
        );
    }

    #[test]
    fn help_is_its_own_outcome() {
        for flag in ["--help", "-h"] {
            let e = GatewayOptions::parse(args(&[flag])).expect_err("help");
            assert_eq!((e.clone(), e.exit_code()), (FlagError::Help, 0));
        }
        let text = usage();
        assert!(
            text.starts_with("Usage:\n  gateway [flags]\n\nFlags:\n"),
            "{text}"
        );
        assert!(text.contains("      --secure-port int "), "{text}");
        assert!(
            text.contains("(default 6443)") && text.contains("(default 30s)"),
            "{text}"
        );
        assert!(
            text.contains("(default [AlwaysAllow])") && text.contains("  -v, --v int "),
            "{text}"
        );
        assert!(
            !text.contains("(default 0)"),
            "pflag omits zero defaults: {text}"
        );
        assert!(
            text.contains("      --enable-http2 ") && text.contains("(default true)"),
            "{text}"
        );
        assert!(
            text.contains("--tls-cert-file string") && text.contains("(required)"),
            "{text}"
        );
    }

    #[test]
    fn gateway_validation() {
        assert_eq!(
            err(&["--authorization-mode=RBAC"]),
            r#"authorization-mode "RBAC" is not supported by this gateway (supported: AlwaysAllow, AlwaysDeny, Webhook)"#
        );
        assert_eq!(
            err(&["--authorization-mode=Webhook"]),
            "authorization-mode Webhook's authorization config file not passed (--authorization-webhook-config-file)"
        );
        assert_eq!(
            err(&["--authorization-webhook-version=v2"]),
            r#"--authorization-webhook-version: unsupported version "v2" (v1 or v1beta1)"#
        );
        assert_eq!(
            err(&["--authorization-mode=Foo"]),
            r#"authorization-mode "Foo" is not a valid mode"#
        );
        assert_eq!(
            err(&["--authorization-mode=AlwaysAllow,AlwaysAllow"]),
            r#"authorization-mode "AlwaysAllow" has mode specified more than once"#
        );
        assert_eq!(
            err(&["--authorization-mode="]),
            "at least one authorization-mode must be passed"
        );
        assert_eq!(
            err(&["--proxy-client-cert-file=p.pem"]),
            "--proxy-client-cert-file and --proxy-client-key-file must be given together"
        );
        assert_eq!(
            err(&["--discovery-check-timeout=0"]),
            "--discovery-check-timeout must be greater than zero"
        );
    }

    #[test]
    fn every_default_in_the_table_parses() {
        let f = GATEWAY_FLAG_SET.parse(args(CERTS)).expect("parse");
        for spec in GATEWAY_FLAGS.iter().filter(|s| !s.required) {
            assert!(
                (spec.check)(spec.default).is_ok(),
                "--{} default {:?}",
                spec.name,
                spec.default
            );
        }
        assert!(f.get::<u16>("nope").is_err());
    }

    #[test]
    fn go_durations() {
        let ok = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(ok("30s"), Duration::from_secs(30));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("2us"), Duration::from_micros(2));
        assert_eq!(ok("2µs"), Duration::from_micros(2));
        assert_eq!(ok("3ns"), Duration::from_nanos(3));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("5.s"), Duration::from_secs(5));
        assert_eq!(ok("+1m"), Duration::from_secs(60));
        assert_eq!(ok("1h1m1s1ms"), Duration::from_millis(3_661_001));
        assert_eq!(
            ok("0.0000000019s"),
            Duration::from_nanos(1),
            "sub-ns truncated"
        );
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("-0"), Duration::ZERO);
        assert_eq!(ok("2562047h"), Duration::from_secs(2_562_047 * 3600));
        let bad = |s: &str| parse_duration(s).expect_err(s);
        assert_eq!(bad(""), r#"time: invalid duration """#);
        assert_eq!(bad("abc"), r#"time: invalid duration "abc""#);
        assert_eq!(bad("."), r#"time: invalid duration ".""#);
        assert_eq!(bad("-"), r#"time: invalid duration "-""#);
        assert_eq!(bad("1"), r#"time: missing unit in duration "1""#);
        assert_eq!(bad("1s2"), r#"time: missing unit in duration "1s2""#);
        assert_eq!(bad("5x"), r#"time: unknown unit "x" in duration "5x""#);
        assert_eq!(bad("1d"), r#"time: unknown unit "d" in duration "1d""#);
        assert_eq!(bad("3000000h"), r#"time: invalid duration "3000000h""#);
        assert_eq!(bad("-5s"), r#"negative duration "-5s" is not allowed"#);
    }

    fn endpoints(text: &str, json: bool) -> Result<Vec<ServiceEndpoint>, String> {
        parse_service_endpoints(text, json)
    }

    #[test]
    fn service_endpoints_from_yaml_and_json() {
        let yaml = "- namespace: kube-system\n  name: metrics-server\n  port: 443\n  address: 127.0.0.1:8443\n\
                    - {namespace: default, name: api, address: \"[::1]:9443\"}\n";
        let expected = vec![
            ServiceEndpoint {
                namespace: "kube-system".into(),
                name: "metrics-server".into(),
                port: 443,
                address: "127.0.0.1:8443".into(),
            },
            ServiceEndpoint {
                namespace: "default".into(),
                name: "api".into(),
                port: 443,
                address: "[::1]:9443".into(),
            },
        ];
        assert_eq!(endpoints(yaml, false), Ok(expected.clone()));
        let json = r#"[{"namespace":"kube-system","name":"metrics-server","port":443,"address":"127.0.0.1:8443"},
                       {"namespace":"default","name":"api","address":"[::1]:9443"}]"#;
        assert_eq!(endpoints(json, true), Ok(expected));
        assert_eq!(endpoints("", false), Ok(vec![]));
        assert_eq!(endpoints("[]", true), Ok(vec![]));
    }

    #[test]
    fn service_endpoint_errors_name_entry_and_field() {
        let entry = |body: &str| {
            format!(
                "- {{namespace: a, name: b, address: 'h:1'}}\n- {{namespace: a, name: c, address: 'h:1'}}\n- {{{body}}}\n"
            )
        };
        let bad = |body: &str| endpoints(&entry(body), false).expect_err(body);
        assert_eq!(
            bad("namespace: a, name: d, address: foo"),
            r#"entry 2: address "foo" is not host:port"#
        );
        assert_eq!(
            bad("namespace: a, name: d, address: 'h:0'"),
            r#"entry 2: address "h:0" has an invalid port "0" (1-65535)"#
        );
        assert_eq!(
            bad("namespace: a, name: d, address: ':80'"),
            r#"entry 2: address ":80" is not host:port"#
        );
        assert_eq!(bad("namespace: a, name: d"), "entry 2: address is required");
        assert_eq!(
            bad("namespace: A, name: d, address: 'h:1'"),
            r#"entry 2: namespace "A" is not a valid DNS-1123 label"#
        );
        assert_eq!(
            bad("namespace: a, name: 1d, address: 'h:1'"),
            r#"entry 2: name "1d" is not a valid DNS-1035 label"#
        );
        assert_eq!(
            bad("namespace: a, name: d, port: 70000, address: 'h:1'"),
            "entry 2: port 70000 is out of range (1-65535)"
        );
        assert_eq!(
            bad("namespace: a, name: d, port: x, address: 'h:1'"),
            r#"entry 2: port must be an integer, got "x""#
        );
        assert_eq!(
            bad("namespace: a, name: d, adress: 'h:1'"),
            r#"entry 2: unknown field "adress" (expected namespace, name, port, address)"#
        );
        assert_eq!(
            bad("namespace: a, name: b, port: 443, address: 'h:2'"),
            "entry 2: duplicate of entry 0 (a/b port 443)"
        );
        assert_eq!(
            endpoints("a: 1", false).expect_err("map"),
            "expected a list of service endpoints at the top level"
        );
        assert_eq!(
            endpoints("[1]", true).expect_err("scalar"),
            "entry 0: expected a mapping with namespace, name, port and address"
        );
        assert!(
            endpoints("[", true)
                .expect_err("syntax")
                .starts_with("invalid JSON: ")
        );
    }

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("flags-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("services.yaml");
        std::fs::write(&path, "- {namespace: a, name: b, address: foo}\n").expect("write");
        let e = load_service_endpoints(&path).expect_err("bad address");
        assert_eq!(
            e,
            format!(
                "{}: entry 0: address \"foo\" is not host:port",
                path.display()
            )
        );
        let missing = load_service_endpoints(&dir.join("nope.json")).expect_err("missing");
        assert!(
            missing.starts_with(&format!("{}: ", dir.join("nope.json").display())),
            "{missing}"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
