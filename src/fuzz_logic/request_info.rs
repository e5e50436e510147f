//! RequestInfo from arbitrary methods and targets.

use super::*;

/// `method` picks one of a fixed set of methods; `uri` is parsed as a request target.
/// Checks that [`RequestInfo::from_parts`] never panics, agrees with the default
/// [`RequestInfoConfig`], and yields attributes the Forbidden message can be built from.
pub fn fuzz_request_info(method: u8, uri: &str) {
    let Ok(method) = Method::from_bytes(METHODS[usize::from(method) % METHODS.len()].as_bytes())
    else {
        return;
    };
    // A target hyper would refuse never reaches the stack.
    let Ok(uri) = Uri::try_from(uri) else {
        return;
    };
    let info = RequestInfo::from_parts(&method, &uri);
    assert_eq!(
        info,
        RequestInfoConfig::default().resolve(&method, &uri),
        "from_parts and the default configuration disagree on {method} {uri}"
    );
    let Ok(info) = info else {
        return;
    };
    if info.is_resource_request {
        assert!(
            info.api_prefix == "api" || info.api_prefix == "apis",
            "{info:?}"
        );
        if info.api_prefix == "api" {
            assert!(info.api_group.is_empty(), "{info:?}");
        }
        assert_eq!(
            info.parts.first().map_or("", String::as_str),
            info.resource,
            "{info:?}"
        );
        if info.verb == "proxy" {
            assert!(info.subresource.is_empty(), "{info:?}");
        }
        // Authorization and the Forbidden message name the resource; a resource request
        // without one would be authorized as if it were about nothing.
        assert!(
            !info.resource.is_empty(),
            "resource request without a resource for {method} {uri}: {info:?}"
        );
    } else {
        assert_eq!(info.verb, method.as_str().to_ascii_lowercase(), "{info:?}");
    }
    let _ = info.is_long_running();
    let attrs = Attributes::new(UserInfo::new("alice", ["dev"]), &info);
    let _ = attrs.is_read_only();
    let _ = forbidden_message(&attrs, "no RBAC policy matched");
}
