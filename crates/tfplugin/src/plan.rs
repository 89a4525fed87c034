//! The schema-driven part of planning a resource change: defaults, unknown computed
//! values, write-only attributes, and requires-replace (always or conditional).
//!
//! Terraform's proposed new state already merges the configuration with the prior state
//! (unset optional+computed and computed attributes keep their prior values). From it:
//! - an unset attribute with a default gets the default;
//! - an unset computed attribute with no prior value becomes unknown;
//! - on an update with real changes, computed-only attributes become unknown unless they
//!   use the prior state for unknown;
//! - write-only attributes are always null;
//! - attributes whose change needs a new resource are reported in `requires_replace`.

use crate::diag::AttributePath;
use crate::schema::{Attribute, Block, BlockNesting, Nesting, Replace, Schema};
use crate::value::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct PlannedChange {
    pub planned: Value,
    pub requires_replace: Vec<AttributePath>,
}

/// Plans from Terraform's proposed new state. `prior` is Null when creating.
pub fn plan_resource(schema: &Schema, prior: &Value, proposed: &Value, config: &Value) -> PlannedChange {
    if proposed.is_null() {
        return PlannedChange {
            planned: Value::Null,
            requires_replace: Vec::new(),
        };
    }
    let creating = prior.is_null();
    let mut planned = proposed.clone();
    let mut replace = Vec::new();
    plan_block(
        &schema.block,
        prior,
        config,
        &mut planned,
        &AttributePath::default(),
        creating,
        &mut replace,
    );
    if !creating && planned != *prior {
        for a in &schema.block.attributes {
            if a.computed && !a.optional && !a.use_state_for_unknown {
                planned.set_attr(&a.name, Value::Unknown);
            }
        }
    }
    PlannedChange {
        planned,
        requires_replace: replace,
    }
}

/// Fills in the defaults a stored state lacks. An attribute with a default is never null in a
/// state this schema planned, so a null one was written before the attribute existed: read with
/// its default, a provider release that adds it plans no change. Single and list blocks only
/// (a set's elements are identified by their whole value). Unlike
/// [`crate::schema::Block::with_defaults`], an absent block stays absent: the state must stay
/// what was planned.
pub fn fill_defaults(block: &Block, value: &mut Value) {
    if !matches!(value, Value::Object(_)) {
        return;
    }
    for a in &block.attributes {
        if let (Some(default), Some(v)) = (&a.default, value.attr_mut(&a.name)) {
            if v.is_null() {
                *v = default.clone();
            }
        }
    }
    for b in &block.blocks {
        match (b.nesting, value.attr_mut(&b.name)) {
            (BlockNesting::Single | BlockNesting::Group, Some(v)) => fill_defaults(&b.block, v),
            (BlockNesting::List, Some(Value::List(elems))) => {
                for e in elems {
                    fill_defaults(&b.block, e);
                }
            }
            _ => {}
        }
    }
}

fn child(path: &AttributePath, name: &str) -> AttributePath {
    path.clone().attr(name)
}

fn plan_attrs(
    attrs: &[Attribute],
    prior: &Value,
    config: &Value,
    planned: &mut Value,
    path: &AttributePath,
    creating: bool,
    replace: &mut Vec<AttributePath>,
) {
    for a in attrs {
        let cfg = config.attr(&a.name);
        let pri = prior.attr(&a.name);
        let Some(pl) = planned.attr_mut(&a.name) else {
            continue;
        };
        let here = child(path, &a.name);
        if a.write_only {
            *pl = Value::Null;
            continue;
        }
        if cfg.is_null() {
            if let Some(d) = &a.default {
                *pl = d.clone();
            } else if a.computed && pl.is_null() && !pri.is_null() {
                // Terraform proposes null for unset optional+computed nested attributes:
                // the value the provider computed before still stands.
                *pl = pri.clone();
            } else if a.computed && pl.is_null() && creating {
                // Unset, no prior value: the provider decides during apply.
                *pl = Value::Unknown;
            }
        }
        if let Some(nested) = &a.nested {
            plan_nested(
                nested.nesting,
                &nested.attributes,
                &[],
                pri,
                cfg,
                pl,
                &here,
                creating,
                replace,
            );
        }
        if !creating {
            let needs = match &a.replace {
                Replace::Never => false,
                Replace::Always => pri != pl,
                Replace::If(f) => pri != pl && f(pri, pl),
            };
            if needs {
                replace.push(here);
            }
        }
    }
}

fn plan_block(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &mut Value,
    path: &AttributePath,
    creating: bool,
    replace: &mut Vec<AttributePath>,
) {
    plan_attrs(&block.attributes, prior, config, planned, path, creating, replace);
    for b in &block.blocks {
        let Some(pl) = planned.attr_mut(&b.name) else {
            continue;
        };
        let nesting = match b.nesting {
            BlockNesting::Single | BlockNesting::Group => Nesting::Single,
            BlockNesting::List => Nesting::List,
            BlockNesting::Set => Nesting::Set,
            BlockNesting::Map => Nesting::Map,
        };
        let here = child(path, &b.name);
        plan_nested(
            nesting,
            &b.block.attributes,
            &b.block.blocks,
            prior.attr(&b.name),
            config.attr(&b.name),
            pl,
            &here,
            creating,
            replace,
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn plan_nested(
    nesting: Nesting,
    attrs: &[Attribute],
    blocks: &[crate::schema::NestedBlock],
    prior: &Value,
    config: &Value,
    planned: &mut Value,
    path: &AttributePath,
    creating: bool,
    replace: &mut Vec<AttributePath>,
) {
    let block = Block {
        attributes: attrs.to_vec(),
        blocks: blocks.to_vec(),
        ..Block::default()
    };
    match (nesting, planned) {
        (Nesting::Single, pl @ Value::Object(_)) => {
            // A nested object that did not exist before is being created.
            let creating_here = creating || prior.is_null();
            plan_block(&block, prior, config, pl, path, creating_here, replace);
        }
        (Nesting::List, Value::List(elems)) => {
            for (i, e) in elems.iter_mut().enumerate() {
                let pri = prior.elements().get(i).unwrap_or(&Value::Null);
                let cfg = config.elements().get(i).unwrap_or(&Value::Null);
                plan_block(
                    &block,
                    pri,
                    cfg,
                    e,
                    &path.clone().index(i),
                    creating || pri.is_null(),
                    replace,
                );
            }
        }
        (Nesting::Set, Value::Set(elems)) => {
            // Set elements have no identity across plans: only defaults and unknowns apply.
            for e in elems.iter_mut() {
                let cfg = e.clone();
                plan_block(&block, &Value::Null, &cfg, e, path, true, replace);
            }
        }
        (Nesting::Map, Value::Map(m)) => {
            for (k, e) in m.iter_mut() {
                let pri = prior.entries().and_then(|p| p.get(k)).unwrap_or(&Value::Null);
                let cfg = config.entries().and_then(|c| c.get(k)).unwrap_or(&Value::Null);
                plan_block(
                    &block,
                    pri,
                    cfg,
                    e,
                    &path.clone().key(k),
                    creating || pri.is_null(),
                    replace,
                );
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::NestedBlock;
    use crate::value::Type;

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    fn schema() -> Schema {
        Schema::new(
            0,
            Block::new(vec![
                Attribute::computed("id", Type::String)
                    .description("d")
                    .use_state_for_unknown(),
                Attribute::computed("dns", Type::String).description("d"),
                Attribute::required("name", Type::String)
                    .description("d")
                    .requires_replace(),
                Attribute::required("size", Type::Number)
                    .description("d")
                    .requires_replace_if(|p, n| matches!((p.as_i64(), n.as_i64()), (Some(p), Some(n)) if n < p)),
                Attribute::optional("kind", Type::String)
                    .description("d")
                    .default(Value::string("SSD")),
                Attribute::optional_computed("zone", Type::String).description("d"),
                Attribute::optional("secret", Type::String)
                    .description("d")
                    .write_only(),
            ])
            .with_blocks(vec![NestedBlock::new(
                "repo",
                BlockNesting::List,
                Block::new(vec![
                    Attribute::required("path", Type::String).description("d"),
                    Attribute::optional("chunk", Type::Number)
                        .description("d")
                        .default(Value::int(1024)),
                ]),
            )]),
        )
    }

    fn config(size: i64, name: &str) -> Value {
        obj(&[
            ("id", Value::Null),
            ("dns", Value::Null),
            ("name", Value::string(name)),
            ("size", Value::int(size)),
            ("kind", Value::Null),
            ("zone", Value::Null),
            ("secret", Value::string("hunter2")),
            (
                "repo",
                Value::List(vec![obj(&[("path", Value::string("/a")), ("chunk", Value::Null)])]),
            ),
        ])
    }

    fn state(size: i64, name: &str) -> Value {
        obj(&[
            ("id", Value::string("fs-1")),
            ("dns", Value::string("fs-1.example")),
            ("name", Value::string(name)),
            ("size", Value::int(size)),
            ("kind", Value::string("SSD")),
            ("zone", Value::string("a")),
            ("secret", Value::Null),
            (
                "repo",
                Value::List(vec![obj(&[("path", Value::string("/a")), ("chunk", Value::int(1024))])]),
            ),
        ])
    }

    /// What Terraform would propose: config, with unset computed attributes from the prior state.
    fn propose(prior: &Value, config: &Value) -> Value {
        let mut p = config.clone();
        if let (Value::Object(pm), Value::Object(prior_m)) = (&mut p, prior) {
            for k in ["id", "dns", "zone", "kind"] {
                if pm.get(k).is_none_or(Value::is_null) {
                    pm.insert(k.to_string(), prior_m.get(k).cloned().unwrap_or(Value::Null));
                }
            }
        }
        p
    }

    #[test]
    fn a_stored_state_from_before_an_attribute_with_a_default_reads_with_the_default() {
        let mut older = state(1200, "a");
        older.set_attr("kind", Value::Null);
        older.set_attr(
            "repo",
            Value::List(vec![obj(&[("path", Value::string("/a")), ("chunk", Value::Null)])]),
        );
        fill_defaults(&schema().block, &mut older);
        assert_eq!(older, state(1200, "a"));
        let c = config(1200, "a");
        let p = plan_resource(&schema(), &older, &propose(&older, &c), &c);
        assert_eq!(p.planned, older, "no change planned");
        // Nothing else is filled: a computed attribute without a default stays null.
        let mut no_zone = state(1200, "a");
        no_zone.set_attr("zone", Value::Null);
        let before = no_zone.clone();
        fill_defaults(&schema().block, &mut no_zone);
        assert_eq!(no_zone, before);
    }

    #[test]
    fn create_fills_defaults_and_unknowns_and_drops_write_only() {
        let c = config(1200, "a");
        let p = plan_resource(&schema(), &Value::Null, &c, &c);
        let pl = &p.planned;
        assert_eq!(pl.attr("id"), &Value::Unknown);
        assert_eq!(pl.attr("zone"), &Value::Unknown);
        assert_eq!(pl.attr("kind"), &Value::string("SSD"));
        assert_eq!(pl.attr("secret"), &Value::Null);
        assert_eq!(pl.attr("repo").elements()[0].attr("chunk"), &Value::int(1024));
        assert!(p.requires_replace.is_empty());
    }

    #[test]
    fn no_change_plans_the_prior_state() {
        let prior = state(1200, "a");
        let c = config(1200, "a");
        let p = plan_resource(&schema(), &prior, &propose(&prior, &c), &c);
        assert_eq!(p.planned, prior);
        assert!(p.requires_replace.is_empty());
        // An optional+computed attribute the API left null stays null (no perpetual diff).
        let mut prior = state(1200, "a");
        prior.set_attr("zone", Value::Null);
        let p = plan_resource(&schema(), &prior, &propose(&prior, &c), &c);
        assert_eq!(p.planned, prior);
    }

    #[test]
    fn growing_updates_in_place_and_marks_computed_unknown() {
        let prior = state(1200, "a");
        let c = config(2400, "a");
        let p = plan_resource(&schema(), &prior, &propose(&prior, &c), &c);
        assert!(p.requires_replace.is_empty());
        assert_eq!(
            p.planned.attr("dns"),
            &Value::Unknown,
            "computed-only values are unknown on change"
        );
        assert_eq!(
            p.planned.attr("id"),
            &Value::string("fs-1"),
            "use_state_for_unknown keeps the id"
        );
        assert_eq!(
            p.planned.attr("zone"),
            &Value::string("a"),
            "optional+computed keeps its prior value"
        );
    }

    #[test]
    fn shrinking_and_renaming_require_replacement() {
        let prior = state(2400, "a");
        let c = config(1200, "b");
        let p = plan_resource(&schema(), &prior, &propose(&prior, &c), &c);
        let paths: Vec<String> = p.requires_replace.iter().map(ToString::to_string).collect();
        assert_eq!(paths, vec!["name", "size"]);
    }

    #[test]
    fn destroy_plans_null() {
        let p = plan_resource(&schema(), &state(1200, "a"), &Value::Null, &Value::Null);
        assert_eq!(p.planned, Value::Null);
    }
}
