//! Typed models: a resource's values as a Rust struct instead of lookups by attribute name.
//!
//! [`model!`](crate::model!) declares a struct whose field names are the schema's attribute
//! names (a raw identifier such as `r#type` names `type`) and implements [`Model`] for it:
//! [`Model::read`] takes the struct out of a configuration, plan or state value, naming the
//! attribute path of anything it cannot take; [`Model::write`] gives a value of the schema's
//! type back.
//!
//! How values map:
//! - `Option<T>`: null, unknown, and a value known only in part where `T` needs all of it (a
//!   list with an unknown element) are `None`; check [`Value::is_unknown`] first where these
//!   must be told apart. Every other field type refuses null and unknown, and the error says
//!   which ([`ModelError::unknown`]), so a plan can leave for apply what is not known yet.
//! - `String`, `bool`, the integer types (range checked), `f64`; `Vec<T>` from a list, set or
//!   tuple, written as the schema's list or set; `BTreeMap<String, T>` from a map or object.
//! - `Value` passes through untouched, for the odd attribute a model keeps as it came.
//! - [`Field<T>`]: unset, unknown, or known, for validation of a configuration where the two
//!   first differ.
//!
//! Defaults live on the schema only: [`Block::with_defaults`] fills them into a value before
//! it is read, so a model never carries a second copy of a default.

use std::collections::BTreeMap;

use crate::diag::{AttributePath, Diagnostic, Diagnostics};
use crate::schema::{Attribute, Block, BlockNesting, NestedBlock, Nesting};
use crate::value::{Number, Type, Value};

/// A value that does not fit its model, with the attribute path it was found at.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelError {
    pub path: AttributePath,
    pub message: String,
    /// The value is not known yet (a plan): nothing is wrong with it, it can only be read
    /// at apply.
    pub unknown: bool,
}

impl ModelError {
    fn new(path: &AttributePath, message: impl Into<String>) -> Self {
        ModelError {
            path: path.clone(),
            message: message.into(),
            unknown: false,
        }
    }

    /// An error diagnostic at the attribute.
    pub fn diagnostic(&self, summary: &str) -> Diagnostic {
        Diagnostic::error(summary, format!("{}: {}", path_text(&self.path), self.message)).at(self.path.clone())
    }

    /// The error as diagnostics, for a `Result<_, Diagnostics>` caller.
    pub fn into_diagnostics(self, summary: &str) -> Diagnostics {
        let mut d = Diagnostics::new();
        d.push(self.diagnostic(summary));
        d
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", path_text(&self.path), self.message)
    }
}

impl std::error::Error for ModelError {}

/// `head_node.allowed_ssh_cidrs[0]`, or "the value" for the whole value.
fn path_text(path: &AttributePath) -> String {
    if path.0.is_empty() {
        "the value".to_string()
    } else {
        path.to_string()
    }
}

/// A Rust type read from and written to Terraform values.
pub trait Model: Sized {
    /// Reads `v`, found at `at`.
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError>;

    /// The value of this, of type `ty` (the schema's type of the attribute).
    fn write(&self, ty: &Type) -> Value;

    /// Reads a whole configuration, plan or state value.
    fn from_value(v: &Value) -> Result<Self, ModelError> {
        Self::read(v, &AttributePath::default())
    }

    /// The attribute (and block) names an object model reads; empty for other types.
    fn fields() -> Vec<&'static str> {
        Vec::new()
    }
}

/// How the object model `T` and the schema block it reads differ: a field that names no
/// attribute or block of `block` (it would always read null), and an attribute or block the
/// model does not read. Empty when they match; for a test beside each model.
pub fn schema_mismatches<T: Model>(block: &crate::schema::Block) -> Vec<String> {
    let fields = T::fields();
    let unread = block_names(block)
        .into_iter()
        .filter(|n| !fields.contains(n))
        .map(|n| format!("{n} is not read by the model"));
    fields_outside_schema::<T>(block).into_iter().chain(unread).collect()
}

/// The fields of the object model `T` that name no attribute or block of `block`: empty when
/// `T` is a view of some of them; for a test beside each view.
pub fn fields_outside_schema<T: Model>(block: &crate::schema::Block) -> Vec<String> {
    let names = block_names(block);
    T::fields()
        .into_iter()
        .filter(|f| !names.contains(f))
        .map(|f| format!("field {f} is not in the schema"))
        .collect()
}

/// How the view `T` of what a provider computes differs from `block`'s computed-only
/// attributes, leaving out `elsewhere` (set for every resource alike, such as `tags_all`): a field
/// that is not computed-only (writing the view back would overwrite what the user set) and a
/// computed-only attribute the view misses. Empty when they match; for a test beside each view.
pub fn computed_mismatches<T: Model>(block: &crate::schema::Block, elsewhere: &[&str]) -> Vec<String> {
    let computed: Vec<&str> = block
        .computed_only()
        .into_iter()
        .filter(|n| !elsewhere.contains(n))
        .collect();
    let fields = T::fields();
    let extra = fields
        .iter()
        .filter(|f| !computed.contains(f))
        .map(|f| format!("{f} is not an attribute only the provider sets"));
    let missing = computed
        .iter()
        .filter(|c| !fields.contains(c))
        .map(|c| format!("{c} is computed but not in the view"));
    extra.chain(missing).collect()
}

fn block_names(block: &crate::schema::Block) -> Vec<&str> {
    let attributes = block.attributes.iter().map(|a| a.name.as_str());
    attributes.chain(block.blocks.iter().map(|b| b.name.as_str())).collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Unknown => "not known yet",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::List(_) => "a list",
        Value::Set(_) => "a set",
        Value::Map(_) => "a map",
        Value::Object(_) => "an object",
        Value::Tuple(_) => "a tuple",
        Value::Dynamic(..) => "a dynamic value",
    }
}

fn mismatch(v: &Value, at: &AttributePath, want: &str) -> ModelError {
    match v {
        Value::Null => ModelError::new(at, format!("must be set ({want})")),
        Value::Unknown => ModelError {
            unknown: true,
            ..ModelError::new(at, format!("is not known yet ({want} is needed here)"))
        },
        other => ModelError::new(at, format!("is {}, not {want}", kind(other))),
    }
}

/// A dynamic value's concrete value.
fn concrete(v: &Value) -> &Value {
    match v {
        Value::Dynamic(_, inner) => concrete(inner),
        other => other,
    }
}

impl Model for Value {
    fn read(v: &Value, _: &AttributePath) -> Result<Self, ModelError> {
        Ok(v.clone())
    }
    fn write(&self, _: &Type) -> Value {
        self.clone()
    }
}

impl Model for String {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::String(s) => Ok(s.clone()),
            other => Err(mismatch(other, at, "a string")),
        }
    }
    fn write(&self, _: &Type) -> Value {
        Value::String(self.clone())
    }
}

impl Model for bool {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::Bool(b) => Ok(*b),
            other => Err(mismatch(other, at, "true or false")),
        }
    }
    fn write(&self, _: &Type) -> Value {
        Value::Bool(*self)
    }
}

impl Model for f64 {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::Number(n) => Ok(n.as_f64()),
            other => Err(mismatch(other, at, "a number")),
        }
    }
    fn write(&self, _: &Type) -> Value {
        Number::from_f64(*self).map(Value::Number).unwrap_or(Value::Null)
    }
}

/// A number exactly as Terraform carries it (prices, sizes with fractions).
impl Model for Number {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::Number(n) => Ok(n.clone()),
            other => Err(mismatch(other, at, "a number")),
        }
    }
    fn write(&self, _: &Type) -> Value {
        Value::Number(self.clone())
    }
}

/// Whole numbers, each checked against its type's range.
macro_rules! integer_model {
    ($($t:ty),*) => {$(
        impl Model for $t {
            fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
                let want = concat!("a whole number that fits ", stringify!($t));
                match concrete(v) {
                    Value::Number(n) if n.as_f64().fract() != 0.0 => {
                        Err(ModelError::new(at, format!("is {n}: give a whole number")))
                    }
                    Value::Number(n) => n.as_i64().and_then(|i| <$t>::try_from(i).ok()).ok_or_else(|| {
                        ModelError::new(
                            at,
                            format!("is {n}, out of range: give a whole number from {} to {}", <$t>::MIN, <$t>::MAX),
                        )
                    }),
                    other => Err(mismatch(other, at, want)),
                }
            }
            fn write(&self, _: &Type) -> Value {
                Value::Number(Number::parse(&self.to_string()).unwrap_or_else(|_| Number::from_i64(0)))
            }
        }
    )*};
}

integer_model!(i64, i32, u64, u32, u16, u8, usize);

impl<T: Model> Model for Option<T> {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::Null | Value::Unknown => Ok(None),
            _ => match T::read(v, at) {
                Ok(t) => Ok(Some(t)),
                // Known only in part (a list with an unknown element): not known yet.
                Err(e) if e.unknown => Ok(None),
                Err(e) => Err(e),
            },
        }
    }
    fn write(&self, ty: &Type) -> Value {
        match self {
            Some(x) => x.write(ty),
            None => Value::Null,
        }
    }
}

/// An attribute as a configuration or plan carries it: not set, set to what is not known until
/// apply, or known. Validation reads a configuration into fields of this type where "not set"
/// and "not known yet" mean different things (a value that is required with another is set
/// even while unknown; a value that is checked is checked only once known).
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Field<T> {
    #[default]
    Unset,
    Unknown,
    Known(T),
}

impl<T> Field<T> {
    /// The value, once known.
    pub fn known(&self) -> Option<&T> {
        match self {
            Field::Known(t) => Some(t),
            _ => None,
        }
    }

    /// The value to change in place, once known.
    pub fn known_mut(&mut self) -> Option<&mut T> {
        match self {
            Field::Known(t) => Some(t),
            _ => None,
        }
    }

    /// Set in the configuration: known, or known at apply.
    pub fn is_set(&self) -> bool {
        !matches!(self, Field::Unset)
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Field::Unknown)
    }
}

/// Some is known, None is unset (null): a computed attribute's value, or its absence, after apply.
impl<T> From<Option<T>> for Field<T> {
    fn from(t: Option<T>) -> Self {
        t.map_or(Field::Unset, Field::Known)
    }
}

impl<T> Field<Vec<T>> {
    /// The elements, once the list is known; none before.
    pub fn items(&self) -> &[T] {
        self.known().map_or(&[], Vec::as_slice)
    }
}

impl Field<String> {
    /// The text, once known.
    pub fn as_str(&self) -> Option<&str> {
        self.known().map(String::as_str)
    }
}

/// Null is `Unset`; unknown, or known only in part where `T` needs all of it, is `Unknown`.
impl<T: Model> Model for Field<T> {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::Null => Ok(Field::Unset),
            Value::Unknown => Ok(Field::Unknown),
            _ => match T::read(v, at) {
                Ok(t) => Ok(Field::Known(t)),
                Err(e) if e.unknown => Ok(Field::Unknown),
                Err(e) => Err(e),
            },
        }
    }
    fn write(&self, ty: &Type) -> Value {
        match self {
            Field::Unset => Value::Null,
            Field::Unknown => Value::Unknown,
            Field::Known(t) => t.write(ty),
        }
    }
}

impl<T: Model> Model for Vec<T> {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::List(e) | Value::Set(e) | Value::Tuple(e) => e
                .iter()
                .enumerate()
                .map(|(i, x)| T::read(x, &at.clone().index(i)))
                .collect(),
            other => Err(mismatch(other, at, "a list")),
        }
    }
    fn write(&self, ty: &Type) -> Value {
        match ty {
            Type::Set(elem) => Value::set(self.iter().map(|x| x.write(elem)).collect()),
            Type::List(elem) => Value::List(self.iter().map(|x| x.write(elem)).collect()),
            _ => Value::List(self.iter().map(|x| x.write(&Type::Dynamic)).collect()),
        }
    }
}

impl<T: Model> Model for BTreeMap<String, T> {
    fn read(v: &Value, at: &AttributePath) -> Result<Self, ModelError> {
        match concrete(v) {
            Value::Map(m) | Value::Object(m) => m
                .iter()
                .map(|(k, x)| T::read(x, &at.clone().key(k)).map(|t| (k.clone(), t)))
                .collect(),
            other => Err(mismatch(other, at, "a map")),
        }
    }
    fn write(&self, ty: &Type) -> Value {
        let elem = match ty {
            Type::Map(e) => e.as_ref().clone(),
            _ => Type::Dynamic,
        };
        Value::Map(self.iter().map(|(k, x)| (k.clone(), x.write(&elem))).collect())
    }
}

/// The attribute name a field stands for: its identifier without `r#`.
pub fn attr_name(field: &'static str) -> &'static str {
    field.strip_prefix("r#").unwrap_or(field)
}

/// Checks that `v` is an object before its fields are read.
pub fn expect_object(v: &Value, at: &AttributePath) -> Result<(), ModelError> {
    match concrete(v) {
        Value::Object(_) => Ok(()),
        other => Err(mismatch(other, at, "an object")),
    }
}

/// Reads the attribute `name` of the object `v` (at `at`).
pub fn field<T: Model>(v: &Value, at: &AttributePath, name: &str) -> Result<T, ModelError> {
    let here = if at.0.is_empty() {
        AttributePath::root(name)
    } else {
        at.clone().attr(name)
    };
    T::read(concrete(v).attr(name), &here)
}

/// Writes each field of the object model `m` over the same attribute of the object `v`, of the
/// object type `ty`, and leaves `v`'s other attributes as they are: for apply, which fills in a
/// plan's computed attributes through a view of only those.
pub fn write_over<T: Model>(m: &T, ty: &Type, v: &mut Value) {
    if let (Value::Object(fields), Value::Object(into)) = (m.write(ty), v) {
        into.extend(fields);
    }
}

/// Reads the view `T` of the object `v` (of the object type `ty`), lets `f` change it and writes
/// it back over `v` (see [`write_over`]).
pub fn change<T: Model>(v: &mut Value, ty: &Type, f: impl FnOnce(&mut T)) -> Result<(), ModelError> {
    let mut view = T::from_value(v)?;
    f(&mut view);
    write_over(&view, ty, v);
    Ok(())
}

/// The type of the attribute `name` in the object type `ty`.
pub fn field_type(ty: &Type, name: &str) -> Type {
    match ty {
        Type::Object(attrs) => attrs.get(name).cloned().unwrap_or(Type::Dynamic),
        _ => Type::Dynamic,
    }
}

/// Declares a struct whose fields are a schema's attributes and implements [`Model`] for it.
///
/// ```
/// tfplugin::model! {
///     #[derive(Debug, PartialEq)]
///     pub struct Disk {
///         pub size: u32,
///         pub r#type: Option<String>,
///     }
/// }
/// use tfplugin::model::Model;
/// let v = tfplugin::Value::Object([("size".to_string(), tfplugin::Value::int(8))].into());
/// assert_eq!(Disk::from_value(&v).ok(), Some(Disk { size: 8, r#type: None }));
/// ```
#[macro_export]
macro_rules! model {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $($(#[$fmeta:meta])* $fvis:vis $field:ident : $fty:ty),* $(,)?
    }) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $fty,)*
        }

        impl $crate::model::Model for $name {
            fn read(
                v: &$crate::Value,
                at: &$crate::AttributePath,
            ) -> ::std::result::Result<Self, $crate::model::ModelError> {
                $crate::model::expect_object(v, at)?;
                Ok($name {
                    $($field: $crate::model::field(v, at, $crate::model::attr_name(stringify!($field)))?,)*
                })
            }

            fn fields() -> ::std::vec::Vec<&'static str> {
                ::std::vec![$($crate::model::attr_name(stringify!($field))),*]
            }

            fn write(&self, ty: &$crate::Type) -> $crate::Value {
                let mut attrs = ::std::collections::BTreeMap::new();
                $(
                    let name = $crate::model::attr_name(stringify!($field));
                    let value = $crate::model::Model::write(&self.$field, &$crate::model::field_type(ty, name));
                    attrs.insert(name.to_string(), value);
                )*
                $crate::Value::Object(attrs)
            }
        }
    };
}

impl Block {
    /// `v` with every unset (null) attribute that has a default given its default, through
    /// nested attributes and blocks. An absent single block that has defaults and no required
    /// attribute reads as present with nothing set (its defaults), so a model never repeats a
    /// block's defaults; other single blocks stay null (absent means "off", or nothing to say).
    /// An absent list or set of blocks is an empty one (as Terraform sends it). Unknown values
    /// are left unknown.
    pub fn with_defaults(&self, v: &Value) -> Value {
        let mut out = v.clone();
        fill_block(self, &mut out);
        out
    }

    /// `v` with every single block that says no more than its defaults (each attribute null
    /// or its default, each nested block likewise absent) made absent: the inverse of
    /// [`Block::with_defaults`], for a value read back from the API (import) to read as a
    /// configuration that leaves those blocks out. Blocks with a required attribute stay.
    pub fn without_defaults(&self, v: &Value) -> Value {
        let mut out = v.clone();
        strip_block(self, &mut out);
        out
    }

    /// True when `v` (a value of this block) says nothing its defaults do not.
    fn at_defaults(&self, v: &Value) -> bool {
        let attrs = self.attributes.iter().all(|a| {
            let x = v.attr(&a.name);
            x.is_null() || a.default.as_ref() == Some(x)
        });
        let blocks = self.blocks.iter().all(|b| {
            let x = v.attr(&b.name);
            x.is_null() || x.elements().is_empty() && !matches!(x, Value::Object(_))
        });
        attrs && blocks
    }

    /// An absent single block of this kind reads as its defaults: it has some and needs
    /// nothing (`timeouts`, with no defaults, stays absent, as it came).
    fn reads_as_defaults(&self) -> bool {
        !self.has_required() && self.attributes.iter().any(|a| a.default.is_some())
    }

    fn has_required(&self) -> bool {
        self.attributes.iter().any(|a| a.required) || self.blocks.iter().any(|b| b.min_items > 0)
    }
}

fn fill_block(block: &Block, v: &mut Value) {
    let Value::Object(m) = v else {
        return;
    };
    fill_attrs(&block.attributes, m);
    for b in &block.blocks {
        let slot = m.entry(b.name.clone()).or_insert(Value::Null);
        fill_nested_block(b, slot);
    }
}

fn fill_attrs(attrs: &[Attribute], m: &mut BTreeMap<String, Value>) {
    for a in attrs {
        let slot = m.entry(a.name.clone()).or_insert(Value::Null);
        if slot.is_null() {
            if let Some(d) = &a.default {
                *slot = d.clone();
            }
        }
        if let Some(nested) = &a.nested {
            let fill = |x: &mut Value| {
                if let Value::Object(inner) = x {
                    fill_attrs(&nested.attributes, inner);
                }
            };
            match (nested.nesting, slot) {
                (Nesting::Single, x) => fill(x),
                (Nesting::List | Nesting::Set, Value::List(e) | Value::Set(e)) => e.iter_mut().for_each(fill),
                (Nesting::Map, Value::Map(e)) => e.values_mut().for_each(fill),
                _ => {}
            }
        }
    }
}

fn fill_nested_block(b: &NestedBlock, slot: &mut Value) {
    match (b.nesting, &mut *slot) {
        (BlockNesting::Single | BlockNesting::Group, Value::Null) if b.block.reads_as_defaults() => {
            *slot = Value::null_object(&b.block.ty());
            fill_block(&b.block, slot);
        }
        (BlockNesting::Single | BlockNesting::Group, _) => fill_block(&b.block, slot),
        (BlockNesting::List, Value::Null) => *slot = Value::List(Vec::new()),
        (BlockNesting::Set, Value::Null) => *slot = Value::Set(Vec::new()),
        (BlockNesting::List | BlockNesting::Set, Value::List(e) | Value::Set(e)) => {
            e.iter_mut().for_each(|x| fill_block(&b.block, x))
        }
        (BlockNesting::Map, Value::Map(e)) => e.values_mut().for_each(|x| fill_block(&b.block, x)),
        _ => {}
    }
}

fn strip_block(block: &Block, v: &mut Value) {
    let Value::Object(m) = v else {
        return;
    };
    for b in &block.blocks {
        let Some(slot) = m.get_mut(&b.name) else {
            continue;
        };
        match (b.nesting, &mut *slot) {
            (BlockNesting::Single | BlockNesting::Group, Value::Object(_)) => {
                strip_block(&b.block, slot);
                if !b.block.has_required() && b.block.at_defaults(slot) {
                    *slot = Value::Null;
                }
            }
            (BlockNesting::List | BlockNesting::Set, Value::List(e) | Value::Set(e)) => {
                e.iter_mut().for_each(|x| strip_block(&b.block, x))
            }
            (BlockNesting::Map, Value::Map(e)) => e.values_mut().for_each(|x| strip_block(&b.block, x)),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Attribute;

    crate::model! {
        #[derive(Debug, Clone, PartialEq, Default)]
        struct Disk {
            size: u32,
            r#type: Option<String>,
        }
    }

    crate::model! {
        #[derive(Debug, Clone, PartialEq)]
        struct Machine {
            name: String,
            zones: Vec<String>,
            spare: Option<Vec<String>>,
            disk: Disk,
            disks: Vec<Disk>,
            labels: BTreeMap<String, String>,
            count: Option<i64>,
            on: bool,
        }
    }

    #[test]
    fn schema_mismatches_name_fields_outside_the_schema_and_attributes_not_read() {
        use crate::schema::{Block, BlockNesting, NestedBlock};
        let matching = Block::new(vec![
            Attribute::required("size", Type::Number),
            Attribute::optional("type", Type::String),
        ]);
        assert_eq!(schema_mismatches::<Disk>(&matching), Vec::<String>::new());
        let drifted = Block::new(vec![
            Attribute::required("size", Type::Number),
            Attribute::optional("kind", Type::String),
        ])
        .with_blocks(vec![NestedBlock::new("cache", BlockNesting::Single, Block::default())]);
        assert_eq!(
            schema_mismatches::<Disk>(&drifted),
            vec![
                "field type is not in the schema".to_string(),
                "kind is not read by the model".to_string(),
                "cache is not read by the model".to_string(),
            ]
        );
    }

    #[test]
    fn computed_mismatches_name_user_attributes_in_the_view_and_computed_ones_it_misses() {
        let block = crate::schema::Block::new(vec![
            Attribute::required("size", Type::Number),
            Attribute::computed("type", Type::String),
            Attribute::computed("id", Type::String),
            Attribute::computed("tags_all", Type::String),
        ]);
        assert_eq!(
            computed_mismatches::<Disk>(&block, &["tags_all"]),
            vec![
                "size is not an attribute only the provider sets".to_string(),
                "id is computed but not in the view".to_string(),
            ]
        );
    }

    #[test]
    fn write_over_sets_the_view_s_attributes_and_keeps_the_others() {
        let ty = Type::Object(
            [
                ("size".to_string(), Type::Number),
                ("type".to_string(), Type::String),
                ("name".to_string(), Type::String),
            ]
            .into(),
        );
        let mut v = Value::Object(
            [
                ("size".to_string(), Value::Unknown),
                ("type".to_string(), Value::string("gp2")),
                ("name".to_string(), Value::string("kept")),
            ]
            .into(),
        );
        let disk = Disk { size: 8, r#type: None };
        write_over(&disk, &ty, &mut v);
        assert_eq!(v.attr("size"), &Value::int(8));
        assert_eq!(v.attr("type"), &Value::Null);
        assert_eq!(v.attr("name"), &Value::string("kept"));
        let mut not_an_object = Value::Null;
        write_over(&disk, &ty, &mut not_an_object);
        assert_eq!(not_an_object, Value::Null);
    }

    #[test]
    fn a_field_tells_unset_from_unknown_and_known_and_writes_each_back() {
        let at = AttributePath::root("size");
        assert_eq!(Field::<u32>::read(&Value::Null, &at), Ok(Field::Unset));
        assert_eq!(Field::<u32>::read(&Value::Unknown, &at), Ok(Field::Unknown));
        assert_eq!(Field::<u32>::read(&Value::int(8), &at), Ok(Field::Known(8)));
        assert_eq!(Field::from(Some(8)), Field::Known(8));
        assert_eq!(Field::<u32>::from(None), Field::Unset);
        let partly = Value::List(vec![Value::string("a"), Value::Unknown]);
        assert_eq!(Field::<Vec<String>>::read(&partly, &at), Ok(Field::Unknown));
        let each = Field::<Vec<Field<String>>>::read(&partly, &at);
        assert_eq!(each, Ok(Field::Known(vec![Field::Known("a".into()), Field::Unknown])));
        let wrong = Field::<u32>::read(&Value::string("x"), &at).expect_err("a string is no number");
        assert_eq!(wrong.path, at);
        for field in [Field::Unset, Field::Unknown, Field::Known(8u32)] {
            assert_eq!(Field::read(&field.write(&Type::Number), &at), Ok(field.clone()));
        }
        assert!(Field::<u32>::Unknown.is_set() && !Field::<u32>::Unset.is_set());
    }

    fn obj(pairs: Vec<(&str, Value)>) -> Value {
        Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    fn schema() -> Block {
        let disk = Block::new(vec![
            Attribute::optional("size", Type::Number).default(Value::int(8)),
            Attribute::optional("type", Type::String),
        ]);
        Block::new(vec![
            Attribute::required("name", Type::String),
            Attribute::optional("zones", Type::set(Type::String)),
            Attribute::optional("spare", Type::list(Type::String)),
            Attribute::optional("labels", Type::map(Type::String)),
            Attribute::optional("count", Type::Number),
            Attribute::optional("on", Type::Bool).default(Value::Bool(true)),
        ])
        .with_blocks(vec![
            NestedBlock::new("disk", BlockNesting::Single, disk.clone()),
            NestedBlock::new("disks", BlockNesting::List, disk),
        ])
    }

    fn machine() -> Value {
        obj(vec![
            ("name", Value::string("m1")),
            ("zones", Value::set(vec![Value::string("b"), Value::string("a")])),
            ("spare", Value::Null),
            (
                "labels",
                Value::Map([("team".to_string(), Value::string("hpc"))].into()),
            ),
            ("count", Value::Unknown),
            ("on", Value::Null),
            ("disk", Value::Null),
            (
                "disks",
                Value::List(vec![obj(vec![("size", Value::Null), ("type", Value::string("io2"))])]),
            ),
        ])
    }

    #[test]
    fn reads_with_the_schemas_defaults_and_writes_back_its_types() {
        let block = schema();
        let v = block.with_defaults(&machine());
        let m = Machine::from_value(&v).expect("reads");
        assert_eq!(m.name, "m1");
        assert_eq!(m.zones, vec!["a", "b"]);
        assert_eq!(m.spare, None);
        assert_eq!(m.count, None, "unknown reads as None");
        assert!(m.on, "the schema's default");
        assert_eq!(
            m.disk,
            Disk { size: 8, r#type: None },
            "an absent optional block reads as its defaults"
        );
        assert_eq!(
            m.disks,
            vec![Disk {
                size: 8,
                r#type: Some("io2".into())
            }]
        );
        assert_eq!(m.labels.get("team").map(String::as_str), Some("hpc"));

        let back = m.write(&block.ty());
        assert!(
            matches!(back.attr("zones"), Value::Set(_)),
            "a set attribute is written as a set"
        );
        assert!(matches!(back.attr("spare"), Value::Null));
        assert_eq!(back.attr("disks").elements()[0].attr("type"), &Value::string("io2"));
        assert_eq!(Machine::from_value(&back), Ok(m), "round trip");
    }

    #[test]
    fn errors_name_the_attribute_path() {
        let mut v = schema().with_defaults(&machine());
        v.set_attr(
            "disks",
            Value::List(vec![obj(vec![("size", Value::int(-1)), ("type", Value::Null)])]),
        );
        let e = Machine::from_value(&v).expect_err("negative size");
        assert_eq!(e.path, AttributePath::root("disks").index(0).attr("size"));
        assert!(
            e.to_string()
                .starts_with("disks[0].size: is -1, out of range: give a whole number from 0 to"),
            "{e}"
        );

        v.set_attr(
            "disks",
            Value::List(vec![obj(vec![
                ("size", Value::Number(Number::parse("1.5").expect("number"))),
                ("type", Value::Null),
            ])]),
        );
        let e = Machine::from_value(&v).expect_err("a fraction");
        assert_eq!(e.to_string(), "disks[0].size: is 1.5: give a whole number");

        v.set_attr("name", Value::Unknown);
        let e = Machine::from_value(&v).expect_err("unknown name");
        assert_eq!(e.to_string(), "name: is not known yet (a string is needed here)");
        assert!(e.unknown);

        v.set_attr("name", Value::int(3));
        let e = Machine::from_value(&v).expect_err("number for a string");
        assert_eq!(e.to_string(), "name: is a number, not a string");
        assert!(!e.unknown);

        let e = Machine::from_value(&Value::Null).expect_err("null object");
        assert_eq!(e.to_string(), "the value: must be set (an object)");
    }

    #[test]
    fn blocks_at_their_defaults_read_back_as_absent() {
        let block = schema();
        let filled = block.with_defaults(&machine());
        let stripped = block.without_defaults(&filled);
        assert!(stripped.attr("disk").is_null(), "the disk block said only its defaults");
        assert_eq!(stripped.attr("on"), &Value::Bool(true), "attributes keep their values");
        let mut sized = filled.clone();
        sized.set_attr("disk", obj(vec![("size", Value::int(9)), ("type", Value::Null)]));
        assert_eq!(
            block.without_defaults(&sized).attr("disk").attr("size"),
            &Value::int(9),
            "a block with a value of its own stays"
        );
        assert_eq!(
            block
                .with_defaults(&obj(vec![("name", Value::string("x"))]))
                .attr("disks"),
            &Value::List(vec![])
        );
    }

    #[test]
    fn an_option_of_a_value_known_in_part_is_none() {
        let mut v = schema().with_defaults(&machine());
        v.set_attr("spare", Value::List(vec![Value::string("a"), Value::Unknown]));
        assert_eq!(Machine::from_value(&v).map(|m| m.spare), Ok(None));
        v.set_attr("zones", Value::List(vec![Value::Unknown]));
        let e = Machine::from_value(&v).expect_err("a list that must be known");
        assert!(e.unknown);
        assert_eq!(e.path, AttributePath::root("zones").index(0));
    }

    #[test]
    fn a_block_with_a_required_attribute_or_no_defaults_stays_absent() {
        let inner = Block::new(vec![Attribute::required("module", Type::String)]);
        let timeouts = Block::new(vec![Attribute::optional("create", Type::String)]);
        let outer = Block::default().with_blocks(vec![
            NestedBlock::new("mfa", BlockNesting::Single, inner),
            NestedBlock::new("timeouts", BlockNesting::Single, timeouts),
        ]);
        let v = outer.with_defaults(&obj(vec![("mfa", Value::Null), ("timeouts", Value::Null)]));
        assert!(v.attr("mfa").is_null());
        assert!(
            v.attr("timeouts").is_null(),
            "read back as it came, not as an empty block"
        );
    }
}
