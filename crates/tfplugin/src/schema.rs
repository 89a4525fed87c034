//! Schemas: attributes, nested attributes, nested blocks, and how each attribute plans.
//!
//! Besides what Terraform sees (types, required/optional/computed, descriptions), an
//! attribute carries its plan behaviour: a default, requires-replace (always or on a
//! condition), and use-state-for-unknown. [`crate::plan`] applies them.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::proto::tfplugin6 as pb;
use crate::value::{Type, Value};

/// Decides from (prior, planned) values of one attribute whether a change needs a new resource.
pub type ReplaceIf = Arc<dyn Fn(&Value, &Value) -> bool + Send + Sync>;

#[derive(Clone, Default)]
pub enum Replace {
    #[default]
    Never,
    Always,
    /// Only when the predicate says so, e.g. "only when shrinking".
    If(ReplaceIf),
}

impl fmt::Debug for Replace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Replace::Never => "Never",
            Replace::Always => "Always",
            Replace::If(_) => "If(..)",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nesting {
    Single,
    List,
    Set,
    Map,
}

/// Nested attributes (protocol 6): an attribute whose type is an object or a collection of objects.
#[derive(Debug, Clone)]
pub struct NestedAttributes {
    pub nesting: Nesting,
    pub attributes: Vec<Attribute>,
}

#[derive(Debug, Clone)]
pub struct Attribute {
    pub name: String,
    pub ty: Type,
    pub nested: Option<NestedAttributes>,
    pub description: String,
    pub required: bool,
    pub optional: bool,
    pub computed: bool,
    pub sensitive: bool,
    pub write_only: bool,
    pub deprecated: bool,
    pub default: Option<Value>,
    pub replace: Replace,
    pub use_state_for_unknown: bool,
}

impl Attribute {
    fn new(name: &str, ty: Type) -> Self {
        Attribute {
            name: name.to_string(),
            ty,
            nested: None,
            description: String::new(),
            required: false,
            optional: false,
            computed: false,
            sensitive: false,
            write_only: false,
            deprecated: false,
            default: None,
            replace: Replace::Never,
            use_state_for_unknown: false,
        }
    }

    pub fn required(name: &str, ty: Type) -> Self {
        Attribute {
            required: true,
            ..Attribute::new(name, ty)
        }
    }

    pub fn optional(name: &str, ty: Type) -> Self {
        Attribute {
            optional: true,
            ..Attribute::new(name, ty)
        }
    }

    pub fn computed(name: &str, ty: Type) -> Self {
        Attribute {
            computed: true,
            ..Attribute::new(name, ty)
        }
    }

    /// Optional; when unset the provider fills it in (from a default or from the API).
    pub fn optional_computed(name: &str, ty: Type) -> Self {
        Attribute {
            optional: true,
            computed: true,
            ..Attribute::new(name, ty)
        }
    }

    /// An attribute made of nested attributes.
    pub fn nested(name: &str, nesting: Nesting, attributes: Vec<Attribute>) -> Self {
        let obj = object_type(&attributes, &[]);
        let ty = match nesting {
            Nesting::Single => obj,
            Nesting::List => Type::list(obj),
            Nesting::Set => Type::set(obj),
            Nesting::Map => Type::map(obj),
        };
        Attribute {
            optional: true,
            nested: Some(NestedAttributes { nesting, attributes }),
            ..Attribute::new(name, ty)
        }
    }

    pub fn description(mut self, text: &str) -> Self {
        self.description = text.to_string();
        self
    }

    pub fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    /// Sent by Terraform in the configuration only; never planned or stored.
    pub fn write_only(mut self) -> Self {
        self.write_only = true;
        self
    }

    pub fn deprecated(mut self) -> Self {
        self.deprecated = true;
        self
    }

    pub fn default(mut self, v: Value) -> Self {
        self.optional = true;
        self.computed = true;
        self.default = Some(v);
        self
    }

    pub fn requires_replace(mut self) -> Self {
        self.replace = Replace::Always;
        self
    }

    pub fn requires_replace_if(mut self, f: impl Fn(&Value, &Value) -> bool + Send + Sync + 'static) -> Self {
        self.replace = Replace::If(Arc::new(f));
        self
    }

    /// A described computed attribute whose value does not change once known (an id, an
    /// address): plans keep the prior value.
    pub fn computed_kept(name: &str, ty: Type, description: &str) -> Self {
        Attribute::computed(name, ty)
            .description(description)
            .use_state_for_unknown()
    }

    /// A computed value that does not change once known: keep the prior value in plans.
    pub fn use_state_for_unknown(mut self) -> Self {
        self.use_state_for_unknown = true;
        self
    }

    pub fn make_required(mut self) -> Self {
        self.required = true;
        self.optional = false;
        self
    }

    fn to_proto(&self) -> pb::schema::Attribute {
        pb::schema::Attribute {
            name: self.name.clone(),
            r#type: if self.nested.is_some() {
                Vec::new()
            } else {
                self.ty.to_json_bytes()
            },
            nested_type: self.nested.as_ref().map(|n| pb::schema::Object {
                attributes: n.attributes.iter().map(Attribute::to_proto).collect(),
                nesting: match n.nesting {
                    Nesting::Single => pb::schema::object::NestingMode::Single,
                    Nesting::List => pb::schema::object::NestingMode::List,
                    Nesting::Set => pb::schema::object::NestingMode::Set,
                    Nesting::Map => pb::schema::object::NestingMode::Map,
                } as i32,
            }),
            description: self.description.clone(),
            required: self.required,
            optional: self.optional,
            computed: self.computed,
            sensitive: self.sensitive,
            description_kind: pb::StringKind::Markdown as i32,
            deprecated: self.deprecated,
            write_only: self.write_only,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockNesting {
    Single,
    List,
    Set,
    Map,
    /// Like Single, but never null: absent means all attributes null.
    Group,
}

#[derive(Debug, Clone)]
pub struct NestedBlock {
    pub name: String,
    pub nesting: BlockNesting,
    pub block: Block,
    pub min_items: i64,
    pub max_items: i64,
}

impl NestedBlock {
    pub fn new(name: &str, nesting: BlockNesting, block: Block) -> Self {
        // Terraform wants min = max for single blocks: 0/0 optional, 1/1 required.
        NestedBlock {
            name: name.to_string(),
            nesting,
            block,
            min_items: 0,
            max_items: 0,
        }
    }

    pub fn min_items(mut self, n: i64) -> Self {
        self.min_items = n;
        self
    }

    pub fn max_items(mut self, n: i64) -> Self {
        self.max_items = n;
        self
    }

    pub fn ty(&self) -> Type {
        let obj = self.block.ty();
        match self.nesting {
            BlockNesting::Single | BlockNesting::Group => obj,
            BlockNesting::List => Type::list(obj),
            BlockNesting::Set => Type::set(obj),
            BlockNesting::Map => Type::map(obj),
        }
    }

    fn to_proto(&self) -> pb::schema::NestedBlock {
        use pb::schema::nested_block::NestingMode as M;
        pb::schema::NestedBlock {
            type_name: self.name.clone(),
            block: Some(self.block.to_proto(0)),
            nesting: match self.nesting {
                BlockNesting::Single => M::Single,
                BlockNesting::List => M::List,
                BlockNesting::Set => M::Set,
                BlockNesting::Map => M::Map,
                BlockNesting::Group => M::Group,
            } as i32,
            min_items: self.min_items,
            max_items: self.max_items,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Block {
    pub attributes: Vec<Attribute>,
    pub blocks: Vec<NestedBlock>,
    pub description: String,
    pub deprecated: bool,
}

impl Block {
    pub fn new(attributes: Vec<Attribute>) -> Self {
        Block {
            attributes,
            ..Block::default()
        }
    }

    pub fn with_blocks(mut self, blocks: Vec<NestedBlock>) -> Self {
        self.blocks = blocks;
        self
    }

    pub fn description(mut self, text: &str) -> Self {
        self.description = text.to_string();
        self
    }

    /// The attributes only the provider sets (computed, neither required nor optional), sorted.
    pub fn computed_only(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .attributes
            .iter()
            .filter(|a| a.computed && !a.optional && !a.required)
            .map(|a| a.name.as_str())
            .collect();
        names.sort_unstable();
        names
    }

    /// The object type of values of this block.
    pub fn ty(&self) -> Type {
        object_type(&self.attributes, &self.blocks)
    }

    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name == name)
    }

    pub fn block(&self, name: &str) -> Option<&NestedBlock> {
        self.blocks.iter().find(|b| b.name == name)
    }

    fn to_proto(&self, version: i64) -> pb::schema::Block {
        pb::schema::Block {
            version,
            attributes: self.attributes.iter().map(Attribute::to_proto).collect(),
            block_types: self.blocks.iter().map(NestedBlock::to_proto).collect(),
            description: self.description.clone(),
            description_kind: pb::StringKind::Markdown as i32,
            deprecated: self.deprecated,
        }
    }
}

fn object_type(attributes: &[Attribute], blocks: &[NestedBlock]) -> Type {
    let mut attrs: BTreeMap<String, Type> = attributes.iter().map(|a| (a.name.clone(), a.ty.clone())).collect();
    for b in blocks {
        attrs.insert(b.name.clone(), b.ty());
    }
    Type::Object(attrs)
}

/// A versioned schema of a provider, resource or data source.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    pub version: i64,
    pub block: Block,
}

impl Schema {
    pub fn new(version: i64, block: Block) -> Self {
        Schema { version, block }
    }

    pub fn ty(&self) -> Type {
        self.block.ty()
    }

    pub(crate) fn to_proto(&self) -> pb::Schema {
        pb::Schema {
            version: self.version,
            block: Some(self.block.to_proto(self.version)),
        }
    }

    /// Checks the schema is well formed: unique names, one of required/optional/computed,
    /// defaults only on optional+computed attributes. Run by every provider's tests.
    pub fn check(&self) -> Result<(), String> {
        check_block(&self.block, "")
    }
}

fn check_attrs(attrs: &[Attribute], at: &str, seen: &mut Vec<String>) -> Result<(), String> {
    for a in attrs {
        let path = if at.is_empty() {
            a.name.clone()
        } else {
            format!("{at}.{}", a.name)
        };
        if seen.contains(&a.name) {
            return Err(format!("{path}: duplicate name"));
        }
        seen.push(a.name.clone());
        if !(a.required || a.optional || a.computed) || (a.required && (a.optional || a.computed)) {
            return Err(format!(
                "{path}: must be required, optional, computed or optional+computed"
            ));
        }
        if a.default.is_some() && !(a.optional && a.computed) {
            return Err(format!("{path}: a default needs optional+computed"));
        }
        if a.write_only && a.computed {
            return Err(format!("{path}: write-only attributes cannot be computed"));
        }
        if a.description.is_empty() {
            return Err(format!("{path}: missing description"));
        }
        if let Some(n) = &a.nested {
            check_attrs(&n.attributes, &path, &mut Vec::new())?;
        }
    }
    Ok(())
}

fn check_block(block: &Block, at: &str) -> Result<(), String> {
    let mut seen = Vec::new();
    check_attrs(&block.attributes, at, &mut seen)?;
    for b in &block.blocks {
        let path = if at.is_empty() {
            b.name.clone()
        } else {
            format!("{at}.{}", b.name)
        };
        if seen.contains(&b.name) {
            return Err(format!("{path}: duplicate name"));
        }
        seen.push(b.name.clone());
        check_block(&b.block, &path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Schema {
        Schema::new(
            1,
            Block::new(vec![
                Attribute::required("name", Type::String)
                    .description("Name.")
                    .requires_replace(),
                Attribute::computed("id", Type::String)
                    .description("Id.")
                    .use_state_for_unknown(),
                Attribute::optional("password", Type::String)
                    .description("Secret.")
                    .sensitive()
                    .write_only(),
                Attribute::nested(
                    "pool",
                    Nesting::List,
                    vec![Attribute::required("az", Type::String).description("AZ.")],
                )
                .description("Pools."),
            ])
            .with_blocks(vec![NestedBlock::new(
                "timeouts",
                BlockNesting::Single,
                Block::new(vec![
                    Attribute::optional("create", Type::String).description("Create timeout.")
                ]),
            )]),
        )
    }

    #[test]
    fn schema_encodes_nested_attributes_without_a_type() {
        let pb = sample().to_proto();
        let block = pb.block.expect("block");
        assert_eq!(block.version, 1);
        let pool = block.attributes.iter().find(|a| a.name == "pool").expect("pool");
        assert!(pool.r#type.is_empty(), "nested attributes must not also set a type");
        assert_eq!(
            pool.nested_type.as_ref().map(|n| n.nesting),
            Some(pb::schema::object::NestingMode::List as i32)
        );
        let pw = block
            .attributes
            .iter()
            .find(|a| a.name == "password")
            .expect("password");
        assert!(pw.write_only && pw.sensitive);
        let name = block.attributes.iter().find(|a| a.name == "name").expect("name");
        assert_eq!(name.r#type, b"\"string\"".to_vec());
        assert_eq!((block.block_types[0].min_items, block.block_types[0].max_items), (0, 0));
    }

    #[test]
    fn object_type_includes_blocks() {
        let Type::Object(attrs) = sample().ty() else {
            panic!("object")
        };
        assert_eq!(
            attrs.keys().cloned().collect::<Vec<_>>(),
            vec!["id", "name", "password", "pool", "timeouts"]
        );
        assert!(matches!(attrs.get("pool"), Some(Type::List(_))));
    }

    #[test]
    fn malformed_schemas_are_caught() {
        assert!(sample().check().is_ok());
        let bad = Schema::new(0, Block::new(vec![Attribute::required("a", Type::String)]));
        assert!(bad.check().expect_err("no description").contains("missing description"));
        let mut dup = sample();
        dup.block
            .attributes
            .push(Attribute::optional("name", Type::String).description("x"));
        assert!(dup.check().expect_err("dup").contains("duplicate"));
    }
}
