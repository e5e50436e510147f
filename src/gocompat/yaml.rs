//! YAML request bodies with the alias bound of sigs.k8s.io/yaml.
//!
//! A YAML alias repeats a node without repeating its text, so a few kilobytes can expand
//! into billions of nodes (the "billion laughs" document). sigs.k8s.io/yaml, which
//! k8s.io/apiserver's YAML serializer decodes with, refuses such documents in
//! go-yaml's decoder (`gopkg.in/yaml.v2` `decode.go`, `allowedAliasRatio`): once more
//! than 1,000 nodes and more than 100 alias-expanded nodes were decoded, the share of
//! alias-expanded nodes may be at most 99 % up to 400,000 nodes, falling linearly to
//! 10 % at 4,000,000 nodes and after; beyond it the document fails with `document
//! contains excessive aliasing`.
//!
//! serde's view of a YAML document replays aliases transparently, so the nodes that came
//! from an alias cannot be told apart here. A document of `n` bytes has at most `n + 1`
//! nodes of its own (every node takes at least one byte), so every node decoded beyond
//! that came from an alias: the rule is applied to that lower bound of the aliased
//! nodes. It refuses no document go-yaml accepts for the ratio, and it bounds the work
//! of any document: a 21 KB document that repeats one 3,000-element anchor 3,000 times
//! stops after about 550,000 nodes, where it would otherwise make nine million.
//!
//! The bound is checked by a first pass that only counts (no value is built), then the
//! document is decoded as usual.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// go-yaml's error for a document over the alias bound.
pub(crate) const EXCESSIVE_ALIASING: &str = "document contains excessive aliasing";

/// `body` decoded as one YAML document into `T`, or go-yaml's error text (without
/// sigs.k8s.io/yaml's `yaml: ` prefix): [`EXCESSIVE_ALIASING`] for a document whose
/// aliases expand past the bound of this module, otherwise the parser's message.
pub(crate) fn from_slice<T: DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    let counter = Counter {
        decoded: Cell::new(0),
        own_max: body.len().saturating_add(1),
        exceeded: Cell::new(false),
    };
    let counted = Node(&counter).deserialize(serde_yaml_ng::Deserializer::from_slice(body));
    if counter.exceeded.get() {
        // go-yaml's text alone, not where the count happened to pass the bound.
        return Err(EXCESSIVE_ALIASING.to_owned());
    }
    counted.map_err(|e| e.to_string())?;
    serde_yaml_ng::from_slice(body).map_err(|e| e.to_string())
}

/// go-yaml's `allowedAliasRatio`: the largest share of alias-expanded nodes a document
/// of `decoded` nodes may have.
fn allowed_alias_ratio(decoded: usize) -> f64 {
    const LOW: usize = 400_000;
    const HIGH: usize = 4_000_000;
    match decoded {
        ..=LOW => 0.99,
        HIGH.. => 0.10,
        // Both are below 2^53, so exact as f64.
        _ => 0.99 - 0.89 * ((decoded - LOW) as f64 / (HIGH - LOW) as f64),
    }
}

/// The nodes decoded so far, against the most the document can hold of its own.
struct Counter {
    decoded: Cell<usize>,
    own_max: usize,
    exceeded: Cell<bool>,
}

impl Counter {
    /// Counts one more node; an error once the aliased share passes go-yaml's bound.
    fn node<E: de::Error>(&self) -> Result<(), E> {
        let decoded = self.decoded.get() + 1;
        self.decoded.set(decoded);
        let aliased = decoded.saturating_sub(self.own_max);
        // Both below 2^53 for any document that fits in memory.
        if aliased > 100
            && decoded > 1000
            && aliased as f64 / decoded as f64 > allowed_alias_ratio(decoded)
        {
            self.exceeded.set(true);
            return Err(E::custom(EXCESSIVE_ALIASING));
        }
        Ok(())
    }
}

/// One node and everything below it, counted and dropped.
#[derive(Clone, Copy)]
struct Node<'a>(&'a Counter);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// `Visitor` methods that count their scalar as one node.
macro_rules! scalar_nodes {
    ($($visit:ident: $ty:ty),* $(,)?) => {
        $(
            fn $visit<E: de::Error>(self, _: $ty) -> Result<(), E> {
                self.0.node()
            }
        )*
    };
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a YAML node")
    }

    // Every scalar is one node.
    scalar_nodes!(
        visit_bool: bool,
        visit_i64: i64,
        visit_i128: i128,
        visit_u64: u64,
        visit_u128: u128,
        visit_f64: f64,
        visit_str: &str,
        visit_bytes: &[u8],
    );

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.node()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.node()
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_newtype_struct<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.node()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.node()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node (`!tag value`): the value is the node.
        let ((), variant) = data.variant_seed(self)?;
        de::VariantAccess::newtype_variant_seed(variant, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `copies` aliases of one anchored sequence of `width` scalars.
    fn bomb(width: usize, copies: usize) -> String {
        let mut doc = String::from("a: &x [");
        doc.push_str(&vec!["1"; width].join(","));
        doc.push_str("]\nb: [");
        doc.push_str(&vec!["*x"; copies].join(","));
        doc.push_str("]\n");
        doc
    }

    #[test]
    fn an_alias_bomb_is_refused_as_go_yaml_refuses_it() {
        let doc = bomb(3000, 3000);
        assert!(doc.len() < 25_000, "{}", doc.len());
        let err = from_slice::<serde_json::Value>(doc.as_bytes()).unwrap_err();
        assert_eq!(err, EXCESSIVE_ALIASING);
        // The classic laughs, nine levels of ten.
        let mut laughs = String::from("l0: &l0 [lol,lol,lol,lol,lol,lol,lol,lol,lol,lol]\n");
        for i in 1..9 {
            let prev = format!("*l{}", i - 1);
            laughs.push_str(&format!(
                "l{i}: &l{i} [{}]\n",
                [prev.as_str(); 10].join(",")
            ));
        }
        let err = from_slice::<serde_json::Value>(laughs.as_bytes()).unwrap_err();
        assert_eq!(err, EXCESSIVE_ALIASING);
    }

    #[test]
    fn documents_with_a_few_aliases_decode_as_before() {
        // Small expansions pass whatever their ratio (go-yaml checks past 1,000 nodes).
        let doc = bomb(10, 50);
        let v: serde_json::Value = from_slice(doc.as_bytes()).unwrap();
        assert_eq!(v["b"].as_array().unwrap().len(), 50);
        assert_eq!(v["b"][49].as_array().unwrap().len(), 10);
        // A larger document whose aliases stay under the ratio.
        let doc = bomb(2000, 3);
        let v: serde_json::Value = from_slice(doc.as_bytes()).unwrap();
        assert_eq!(v["b"][2].as_array().unwrap().len(), 2000);
        let review = "apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes: {verb: get, resource: pods}\n";
        let v: serde_json::Value = from_slice(review.as_bytes()).unwrap();
        assert_eq!(v["spec"]["resourceAttributes"]["verb"], "get");
        // Parser errors are the parser's.
        let err = from_slice::<serde_json::Value>(b"a: [1, 2").unwrap_err();
        assert!(err.contains("did not find expected"), "{err}");
    }

    #[test]
    fn the_allowed_ratio_is_go_yamls() {
        assert_eq!(allowed_alias_ratio(0), 0.99);
        assert_eq!(allowed_alias_ratio(400_000), 0.99);
        assert!((allowed_alias_ratio(2_200_000) - 0.545).abs() < 1e-9);
        assert_eq!(allowed_alias_ratio(4_000_000), 0.10);
        assert_eq!(allowed_alias_ratio(usize::MAX), 0.10);
    }
}
