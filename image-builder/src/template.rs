//! Image templates: HCL2 in the spirit of Packer.
//!
//! ```hcl
//! variable "suite" { type = string  default = "bookworm" }
//! source "local" "debian" { suite = var.suite  disk_size = "4G" }
//! build {
//!   sources = ["source.local.debian"]
//!   component "slurm" { accounting = true }
//!   provisioner "shell" { inline = ["echo hello"] }
//! }
//! publish { ami_name = "hpc-${var.suite}"  regions = ["us-east-1"] }
//! ```
//!
//! Parsing keeps every block's line, so each error names `file:line` and the block. All
//! problems are collected and reported together, not only the first.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use hcl::edit::structure::{Block, Body, Structure};
use hcl::edit::Span;
use hcl::eval::{Context, Evaluate};
use hcl::Value;

/// One problem in a template, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    /// The block it is in, e.g. `component "cuda"`; empty at the top level.
    pub block: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.block.is_empty() {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}:{}: in {}: {}", self.file, self.line, self.block, self.message)
        }
    }
}

/// Every problem found, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problems(pub Vec<Problem>);

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// A value after variables were substituted.
pub type Args = BTreeMap<String, Located<Value>>;

#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// `local` or `amazon-ebs`.
    pub builder: String,
    pub name: String,
    pub line: usize,
    pub args: Args,
    /// Nested blocks by type, e.g. `source_ami_filter`.
    pub blocks: BTreeMap<String, Args>,
}

impl Source {
    /// `source.<builder>.<name>`, the form `build.sources` refers to.
    pub fn reference(&self) -> String {
        format!("source.{}.{}", self.builder, self.name)
    }
}

/// One step of a build, in the order written.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDecl {
    /// `component` or `provisioner`.
    pub kind: String,
    /// Component name, or provisioner type (`shell`, `file`).
    pub name: String,
    pub line: usize,
    pub args: Args,
}

impl StepDecl {
    pub fn block_name(&self) -> String {
        format!("{} \"{}\"", self.kind, self.name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    pub line: usize,
    pub sources: Vec<String>,
    pub steps: Vec<StepDecl>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub path: PathBuf,
    /// The directory relative paths (file provisioners, scripts) are taken from.
    pub dir: PathBuf,
    /// The template's text, for the template hash.
    pub text: String,
    pub variables: BTreeMap<String, Value>,
    pub sources: Vec<Source>,
    pub build: Build,
    pub publish: Option<Located<Args>>,
}

/// What a variable block declares.
#[derive(Debug, Clone, PartialEq)]
struct VariableDecl {
    name: String,
    line: usize,
    kind: VarType,
    default: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VarType {
    Any,
    String,
    Number,
    Bool,
    ListOfString,
    MapOfString,
}

impl VarType {
    fn parse(expr: &str) -> Option<VarType> {
        Some(match expr.replace(' ', "").as_str() {
            "any" => VarType::Any,
            "string" => VarType::String,
            "number" => VarType::Number,
            "bool" => VarType::Bool,
            "list(string)" => VarType::ListOfString,
            "map(string)" => VarType::MapOfString,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            VarType::Any => "any",
            VarType::String => "string",
            VarType::Number => "number",
            VarType::Bool => "bool",
            VarType::ListOfString => "list(string)",
            VarType::MapOfString => "map(string)",
        }
    }

    fn accepts(self, v: &Value) -> bool {
        match self {
            VarType::Any => true,
            VarType::String => v.is_string(),
            VarType::Number => v.is_number(),
            VarType::Bool => v.is_boolean(),
            VarType::ListOfString => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            VarType::MapOfString => v.as_object().is_some_and(|m| m.values().all(Value::is_string)),
        }
    }

    /// A `-var name=value` string as this type.
    fn parse_cli(self, raw: &str) -> Result<Value, String> {
        match self {
            VarType::String | VarType::Any => Ok(Value::String(raw.to_string())),
            VarType::Bool => match raw {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                _ => Err(format!("{raw:?} is not a bool (true or false)")),
            },
            VarType::Number => raw
                .parse::<f64>()
                .ok()
                .and_then(hcl::Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| format!("{raw:?} is not a number")),
            VarType::ListOfString | VarType::MapOfString => {
                let v: Value = hcl::from_str(&format!("v = {raw}"))
                    .map_err(|e| format!("{raw:?} is not a {}: {e}", self.name()))
                    .and_then(|body: hcl::Map<String, Value>| {
                        body.get("v").cloned().ok_or_else(|| format!("{raw:?} is empty"))
                    })?;
                if self.accepts(&v) {
                    Ok(v)
                } else {
                    Err(format!("{raw:?} is not a {}", self.name()))
                }
            }
        }
    }
}

/// Variable values given on the command line.
#[derive(Debug, Clone, Default)]
pub struct VarInputs {
    /// `-var name=value`, in order.
    pub vars: Vec<(String, String)>,
    /// `-var-file FILE`, in order (later files and `-var` win).
    pub files: Vec<PathBuf>,
}

/// Line number (1-based) of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset.min(text.len()))
        .map(|s| s.bytes().filter(|b| *b == b'\n').count() + 1)
        .unwrap_or(1)
}

struct Parser<'a> {
    file: String,
    text: &'a str,
    problems: Vec<Problem>,
}

impl Parser<'_> {
    fn line(&self, span: Option<std::ops::Range<usize>>) -> usize {
        span.map(|r| line_of(self.text, r.start)).unwrap_or(1)
    }

    fn problem(&mut self, line: usize, block: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.file.clone(),
            line,
            block: block.to_string(),
            message: message.into(),
        });
    }

    fn labels(block: &Block) -> Vec<String> {
        block.labels.iter().map(|l| l.as_str().to_string()).collect()
    }

    fn block_name(block: &Block) -> String {
        let mut s = block.ident.as_str().to_string();
        for l in Self::labels(block) {
            s.push_str(&format!(" \"{l}\""));
        }
        s
    }

    /// Attributes of a body evaluated against `ctx`; nested blocks returned separately.
    fn eval_body(&mut self, body: &Body, ctx: &Context, block: &str) -> (Args, Vec<(Block, usize)>) {
        let mut args = Args::new();
        let mut blocks = Vec::new();
        for s in body.iter() {
            match s {
                Structure::Attribute(a) => {
                    let line = self.line(a.span());
                    let key = a.key.as_str().to_string();
                    let expr: hcl::Expression = a.value.clone().into();
                    match expr.evaluate(ctx) {
                        Ok(value) => {
                            if args.insert(key.clone(), Located { value, line }).is_some() {
                                self.problem(line, block, format!("argument {key:?} is set twice"));
                            }
                        }
                        Err(e) => self.problem(line, block, format!("argument {key:?}: {}", eval_message(&e))),
                    }
                }
                Structure::Block(b) => {
                    let line = self.line(b.span());
                    blocks.push((b.clone(), line));
                }
            }
        }
        (args, blocks)
    }
}

/// hcl's evaluation errors, in words that name the fix for the common cases.
fn eval_message(e: &hcl::eval::Error) -> String {
    let text = e.to_string();
    if text.contains("undefined variable") || text.contains("no such key") {
        format!("{text} (declare it in a `variable` block and refer to it as var.NAME)")
    } else {
        text
    }
}

/// Reads and checks a template's structure and variables. Component names and arguments
/// are checked against the catalog by [`crate::plan`].
pub fn load(path: &Path, inputs: &VarInputs) -> Result<Template, Problems> {
    let (t, problems) = load_all(path, inputs)?;
    if problems.is_empty() {
        Ok(t)
    } else {
        Err(Problems(problems))
    }
}

/// Like [`load`], but returns the template together with its problems (so later checks can
/// add theirs and everything is reported at once); fails outright only when it cannot parse.
pub fn load_all(path: &Path, inputs: &VarInputs) -> Result<(Template, Vec<Problem>), Problems> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Problems(vec![Problem {
            file: file.clone(),
            line: 0,
            block: String::new(),
            message: format!("cannot read the template: {e}"),
        }])
    })?;
    parse_all(&file, &text, path.parent().unwrap_or(Path::new(".")), inputs)
}

pub fn parse(file: &str, text: &str, dir: &Path, inputs: &VarInputs) -> Result<Template, Problems> {
    let (t, problems) = parse_all(file, text, dir, inputs)?;
    if problems.is_empty() {
        Ok(t)
    } else {
        Err(Problems(problems))
    }
}

/// Parses a template, returning it with its problems; fails outright only on syntax errors.
pub fn parse_all(file: &str, text: &str, dir: &Path, inputs: &VarInputs) -> Result<(Template, Vec<Problem>), Problems> {
    let body = hcl::edit::parser::parse_body(text).map_err(|e| {
        Problems(vec![Problem {
            file: file.to_string(),
            line: e.location().line(),
            block: String::new(),
            message: format!("syntax error at column {}: {}", e.location().column(), e.message()),
        }])
    })?;
    let mut p = Parser {
        file: file.to_string(),
        text,
        problems: Vec::new(),
    };
    // Variables first: everything else refers to them.
    let mut decls: Vec<VariableDecl> = Vec::new();
    for s in body.iter() {
        let Structure::Block(b) = s else { continue };
        if b.ident.as_str() == "variable" {
            if let Some(d) = parse_variable(&mut p, b, &decls) {
                decls.push(d);
            }
        }
    }
    let values = variable_values(&mut p, &decls, inputs);
    let mut ctx = Context::new();
    let var_obj: hcl::Map<String, Value> = values.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    ctx.declare_var("var", Value::Object(var_obj));
    let (sources, build, publish) = parse_blocks(&mut p, &body, &ctx);
    let build = check_build(&mut p, build, &sources);
    p.problems
        .sort_by(|a, b| (a.file.as_str(), a.line).cmp(&(b.file.as_str(), b.line)));
    Ok((
        Template {
            path: PathBuf::from(file),
            dir: dir.to_path_buf(),
            text: text.to_string(),
            variables: values,
            sources,
            build,
            publish,
        },
        p.problems,
    ))
}

/// One `variable "NAME" { type, default }` block (`decls`: those declared before it).
fn parse_variable(p: &mut Parser<'_>, b: &Block, decls: &[VariableDecl]) -> Option<VariableDecl> {
    let empty = Context::new();
    let line = p.line(b.span());
    let labels = Parser::labels(b);
    let name = Parser::block_name(b);
    if labels.len() != 1 {
        p.problem(
            line,
            &name,
            "a variable block takes exactly one label: variable \"NAME\" { ... }",
        );
        return None;
    }
    let mut kind = VarType::Any;
    let mut default = None;
    for a in b.body.attributes() {
        let aline = p.line(a.span());
        match a.key.as_str() {
            "type" => {
                let raw = a.value.to_string();
                match VarType::parse(raw.trim()) {
                    Some(t) => kind = t,
                    None => p.problem(
                        aline,
                        &name,
                        format!(
                            "type {:?} is not supported: use string, number, bool, list(string), map(string) or any",
                            raw.trim()
                        ),
                    ),
                }
            }
            "default" => {
                let expr: hcl::Expression = a.value.clone().into();
                match expr.evaluate(&empty) {
                    Ok(v) => default = Some(v),
                    Err(e) => p.problem(aline, &name, format!("default must be a literal: {}", eval_message(&e))),
                }
            }
            "description" | "sensitive" => {}
            other => p.problem(
                aline,
                &name,
                format!("unknown argument {other:?} (a variable takes type, default, description, sensitive)"),
            ),
        }
    }
    if let Some(d) = &default {
        if !kind.accepts(d) {
            p.problem(line, &name, format!("default does not match type {}", kind.name()));
        }
    }
    if decls.iter().any(|d| d.name == labels[0]) {
        p.problem(line, &name, format!("variable {:?} is declared twice", labels[0]));
    }
    Some(VariableDecl {
        name: labels[0].clone(),
        line,
        kind,
        default,
    })
}

/// Each variable's value: its default, then the var files, then `-var`; one without a value
/// is a problem.
fn variable_values(p: &mut Parser<'_>, decls: &[VariableDecl], inputs: &VarInputs) -> BTreeMap<String, Value> {
    let mut values: BTreeMap<String, Value> = BTreeMap::new();
    for d in decls {
        if let Some(v) = &d.default {
            values.insert(d.name.clone(), v.clone());
        }
    }
    for vf in &inputs.files {
        read_var_file(vf, decls, &mut values, &mut p.problems);
    }
    for (k, raw) in &inputs.vars {
        match decls.iter().find(|d| &d.name == k) {
            None => p.problem(0, "", format!("-var {k}=...: the template declares no variable {k:?}")),
            Some(d) => match d.kind.parse_cli(raw) {
                Ok(v) => {
                    values.insert(k.clone(), v);
                }
                Err(e) => p.problem(d.line, &format!("variable \"{k}\""), format!("-var {k}: {e}")),
            },
        }
    }
    for d in decls {
        if !values.contains_key(&d.name) {
            p.problem(
                d.line,
                &format!("variable \"{}\"", d.name),
                format!(
                    "variable {:?} has no value: give it a default, or pass -var {}=VALUE or a -var-file",
                    d.name, d.name
                ),
            );
        }
    }
    values
}

/// The source, build and publish blocks (variables were read before).
fn parse_blocks(p: &mut Parser<'_>, body: &Body, ctx: &Context) -> (Vec<Source>, Option<Build>, Option<Located<Args>>) {
    let mut sources: Vec<Source> = Vec::new();
    let mut build: Option<Build> = None;
    let mut publish = None;
    for s in body.iter() {
        let b = match s {
            Structure::Attribute(a) => {
                let line = p.line(a.span());
                p.problem(
                    line,
                    "",
                    format!(
                        "unexpected argument {:?} at the top level (only variable, source, build and publish blocks)",
                        a.key.as_str()
                    ),
                );
                continue;
            }
            Structure::Block(b) => b,
        };
        let line = p.line(b.span());
        let name = Parser::block_name(b);
        match b.ident.as_str() {
            "variable" => {}
            "source" => {
                if let Some(src) = parse_source(p, b, ctx, &sources) {
                    sources.push(src);
                }
            }
            "build" if build.is_some() => p.problem(line, &name, "a template has one build block"),
            "build" => build = Some(parse_build(p, b, line, ctx)),
            "publish" if publish.is_some() => p.problem(line, &name, "a template has one publish block"),
            "publish" => publish = Some(parse_publish(p, b, ctx)),
            other => p.problem(
                line,
                &name,
                format!("unknown block type {other:?} (use variable, source, build or publish)"),
            ),
        }
    }
    (sources, build, publish)
}

/// A `source "BUILDER" "NAME"` block with its nested blocks (`sources`: those before it).
fn parse_source(p: &mut Parser<'_>, b: &Block, ctx: &Context, sources: &[Source]) -> Option<Source> {
    let line = p.line(b.span());
    let name = Parser::block_name(b);
    let labels = Parser::labels(b);
    if labels.len() != 2 {
        p.problem(
            line,
            &name,
            "a source block takes two labels: source \"local\" \"NAME\"",
        );
        return None;
    }
    if !["local", "amazon-ebs"].contains(&labels[0].as_str()) {
        p.problem(
            line,
            &name,
            format!("unknown builder {:?}: use \"local\" or \"amazon-ebs\"", labels[0]),
        );
        return None;
    }
    let (args, nested) = p.eval_body(&b.body, ctx, &name);
    let mut blocks = BTreeMap::new();
    for (nb, nline) in nested {
        let nname = format!("{name} > {}", Parser::block_name(&nb));
        let (nargs, deeper) = p.eval_body(&nb.body, ctx, &nname);
        for (_, dline) in deeper {
            p.problem(dline, &nname, "nested blocks are not allowed here");
        }
        if blocks.insert(nb.ident.as_str().to_string(), nargs).is_some() {
            p.problem(nline, &nname, "this block appears twice");
        }
    }
    if sources
        .iter()
        .any(|s: &Source| s.builder == labels[0] && s.name == labels[1])
    {
        p.problem(line, &name, "this source is declared twice");
    }
    Some(Source {
        builder: labels[0].clone(),
        name: labels[1].clone(),
        line,
        args,
        blocks,
    })
}

/// The `publish` block: arguments only.
fn parse_publish(p: &mut Parser<'_>, b: &Block, ctx: &Context) -> Located<Args> {
    let line = p.line(b.span());
    let name = Parser::block_name(b);
    let (args, nested) = p.eval_body(&b.body, ctx, &name);
    for (nb, nline) in nested {
        p.problem(
            nline,
            &name,
            format!("unexpected block {:?} in publish", nb.ident.as_str()),
        );
    }
    Located { value: args, line }
}

/// The build block (a stand-in when there is none, which is a problem), its sources declared.
fn check_build(p: &mut Parser<'_>, build: Option<Build>, sources: &[Source]) -> Build {
    let build = match build {
        Some(b) => b,
        None => {
            p.problem(
                1,
                "",
                "the template has no build block: add build { sources = [...] component \"...\" {} }",
            );
            Build {
                line: 1,
                sources: vec![],
                steps: vec![],
            }
        }
    };
    for s in &build.sources {
        if !sources.iter().any(|src| &src.reference() == s) {
            let known: Vec<String> = sources.iter().map(Source::reference).collect();
            p.problem(
                build.line,
                "build",
                format!(
                    "sources names {s:?}, which is not declared (declared: {})",
                    known.join(", ")
                ),
            );
        }
    }
    build
}

fn parse_build(p: &mut Parser<'_>, b: &Block, line: usize, ctx: &Context) -> Build {
    let (args, nested) = p.eval_body(&b.body, ctx, "build");
    let mut sources = Vec::new();
    for (k, v) in &args {
        match k.as_str() {
            "sources" => match v.value.as_array() {
                Some(list) if list.iter().all(Value::is_string) => {
                    sources = list.iter().filter_map(|s| s.as_str().map(str::to_string)).collect();
                }
                _ => p.problem(
                    v.line,
                    "build",
                    "sources must be a list of strings like [\"source.local.NAME\"]",
                ),
            },
            "name" => {}
            other => p.problem(
                v.line,
                "build",
                format!("unknown argument {other:?} (build takes sources, name)"),
            ),
        }
    }
    if sources.is_empty() && !args.contains_key("sources") {
        p.problem(
            line,
            "build",
            "build needs sources = [\"source.<builder>.<name>\", ...]",
        );
    }
    let mut steps = Vec::new();
    for (nb, nline) in nested {
        let labels = Parser::labels(&nb);
        let name = Parser::block_name(&nb);
        let kind = nb.ident.as_str().to_string();
        if kind != "component" && kind != "provisioner" {
            p.problem(
                nline,
                "build",
                format!("unknown block {kind:?} in build (use component or provisioner)"),
            );
            continue;
        }
        if labels.len() != 1 {
            p.problem(
                nline,
                &name,
                format!("a {kind} block takes one label: {kind} \"NAME\" {{ ... }}"),
            );
            continue;
        }
        let (args, deeper) = p.eval_body(&nb.body, ctx, &name);
        for (_, dline) in deeper {
            p.problem(dline, &name, "nested blocks are not allowed here");
        }
        steps.push(StepDecl {
            kind,
            name: labels[0].clone(),
            line: nline,
            args,
        });
    }
    Build { line, sources, steps }
}

fn read_var_file(
    path: &Path,
    decls: &[VariableDecl],
    values: &mut BTreeMap<String, Value>,
    problems: &mut Vec<Problem>,
) {
    let file = path.display().to_string();
    let mut problem = |line: usize, message: String| {
        problems.push(Problem {
            file: file.clone(),
            line,
            block: String::new(),
            message,
        })
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return problem(0, format!("cannot read the var file: {e}")),
    };
    let body = match hcl::edit::parser::parse_body(&text) {
        Ok(b) => b,
        Err(e) => return problem(e.location().line(), format!("syntax error: {}", e.message())),
    };
    let ctx = Context::new();
    for s in body.iter() {
        let line = s.span().map(|r| line_of(&text, r.start)).unwrap_or(1);
        let Structure::Attribute(a) = s else {
            problem(line, "a var file holds only NAME = VALUE lines".to_string());
            continue;
        };
        let name = a.key.as_str();
        let Some(d) = decls.iter().find(|d| d.name == name) else {
            problem(line, format!("the template declares no variable {name:?}"));
            continue;
        };
        let expr: hcl::Expression = a.value.clone().into();
        match expr.evaluate(&ctx) {
            Ok(v) if d.kind.accepts(&v) => {
                values.insert(name.to_string(), v);
            }
            Ok(_) => problem(line, format!("{name} must be a {}", d.kind.name())),
            Err(e) => problem(line, format!("{name}: {}", eval_message(&e))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Typed access to evaluated arguments
// ---------------------------------------------------------------------------------------------

/// Reads typed arguments out of a block's [`Args`], recording problems with their lines and
/// refusing arguments nobody asked for.
pub struct ArgReader<'a> {
    file: &'a str,
    block: String,
    line: usize,
    args: &'a Args,
    seen: Vec<&'static str>,
    pub problems: Vec<Problem>,
}

impl<'a> ArgReader<'a> {
    pub fn new(file: &'a str, block: impl Into<String>, line: usize, args: &'a Args) -> Self {
        ArgReader {
            file,
            block: block.into(),
            line,
            args,
            seen: Vec::new(),
            problems: Vec::new(),
        }
    }

    pub fn problem(&mut self, line: Option<usize>, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.file.to_string(),
            line: line.unwrap_or(self.line),
            block: self.block.clone(),
            message: message.into(),
        });
    }

    pub fn line_of(&self, key: &str) -> Option<usize> {
        self.args.get(key).map(|a| a.line)
    }

    pub fn string(&mut self, key: &'static str) -> Option<String> {
        self.seen.push(key);
        let arg = self.args.get(key)?;
        match &arg.value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                self.problem(Some(arg.line), format!("{key} must be a string"));
                None
            }
        }
    }

    pub fn required_string(&mut self, key: &'static str) -> String {
        match self.string(key) {
            Some(s) if !s.is_empty() => s,
            _ => {
                if !self.args.contains_key(key) {
                    self.problem(None, format!("{key} is required"));
                }
                String::new()
            }
        }
    }

    pub fn bool(&mut self, key: &'static str, default: bool) -> bool {
        self.seen.push(key);
        match self.args.get(key) {
            None => default,
            Some(Located {
                value: Value::Bool(b), ..
            }) => *b,
            Some(a) => {
                let line = a.line;
                self.problem(Some(line), format!("{key} must be true or false"));
                default
            }
        }
    }

    pub fn u64(&mut self, key: &'static str, default: u64) -> u64 {
        self.seen.push(key);
        match self.args.get(key) {
            None => default,
            Some(a) => match a.value.as_u64() {
                Some(n) => n,
                None => {
                    let line = a.line;
                    self.problem(Some(line), format!("{key} must be a whole number"));
                    default
                }
            },
        }
    }

    pub fn strings(&mut self, key: &'static str) -> Vec<String> {
        self.seen.push(key);
        match self.args.get(key) {
            None => vec![],
            Some(a) => match a.value.as_array() {
                Some(list) if list.iter().all(Value::is_string) => {
                    list.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
                }
                _ => {
                    let line = a.line;
                    self.problem(Some(line), format!("{key} must be a list of strings"));
                    vec![]
                }
            },
        }
    }

    pub fn string_map(&mut self, key: &'static str) -> BTreeMap<String, String> {
        self.seen.push(key);
        match self.args.get(key) {
            None => BTreeMap::new(),
            Some(a) => match a.value.as_object() {
                Some(m) if m.values().all(Value::is_string) => m
                    .iter()
                    .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                    .collect(),
                _ => {
                    let line = a.line;
                    self.problem(Some(line), format!("{key} must be a map of strings"));
                    BTreeMap::new()
                }
            },
        }
    }

    /// Marks an argument as known without reading it here.
    pub fn allow(&mut self, key: &'static str) {
        self.seen.push(key);
    }

    /// Records every argument that was not read as unknown, naming the known ones.
    pub fn finish(mut self) -> Vec<Problem> {
        let unknown: Vec<(String, usize)> = self
            .args
            .iter()
            .filter(|(k, _)| !self.seen.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.line))
            .collect();
        let mut known: Vec<&str> = self.seen.clone();
        known.sort_unstable();
        known.dedup();
        for (k, line) in unknown {
            self.problem(
                Some(line),
                format!("unknown argument {k:?} (known: {})", known.join(", ")),
            );
        }
        self.problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Template {
        parse("t.pkr.hcl", text, Path::new("."), &VarInputs::default()).expect("parses")
    }

    fn parse_err(text: &str, inputs: &VarInputs) -> Vec<String> {
        match parse("t.pkr.hcl", text, Path::new("."), inputs) {
            Ok(_) => panic!("expected problems"),
            Err(p) => p.0.iter().map(ToString::to_string).collect(),
        }
    }

    const GOOD: &str = r#"
variable "suite" {
  type    = string
  default = "bookworm"
}

source "local" "debian" {
  suite = var.suite
}

build {
  sources = ["source.local.debian"]

  component "munge" {}
  component "slurm" {
    accounting = true
  }
  provisioner "shell" {
    inline = ["echo ${var.suite}"]
  }
}

publish {
  ami_name = "hpc-${var.suite}"
  regions  = ["us-east-1", "us-west-2"]
}
"#;

    #[test]
    fn parses_sources_steps_and_publish_with_variables() {
        let t = parse_ok(GOOD);
        assert_eq!(t.sources.len(), 1);
        assert_eq!(t.sources[0].args["suite"].value, Value::from("bookworm"));
        assert_eq!(t.build.sources, vec!["source.local.debian"]);
        let names: Vec<&str> = t.build.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["munge", "slurm", "shell"]);
        assert_eq!(t.build.steps[1].line, 15);
        assert_eq!(
            t.build.steps[2].args["inline"].value,
            Value::from(vec!["echo bookworm"])
        );
        let publish = t.publish.expect("publish");
        assert_eq!(publish.value["ami_name"].value, Value::from("hpc-bookworm"));
    }

    #[test]
    fn var_flags_and_files_override_defaults_with_type_checks() {
        let dir = std::env::temp_dir().join(format!("hpc-image-vars-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let vf = dir.join("x.pkrvars.hcl");
        std::fs::write(&vf, "suite = \"trixie\"\n").expect("write");
        let inputs = VarInputs {
            vars: vec![],
            files: vec![vf.clone()],
        };
        let t = parse("t", GOOD, &dir, &inputs).expect("parses");
        assert_eq!(t.variables["suite"], Value::from("trixie"));
        let inputs = VarInputs {
            vars: vec![("suite".into(), "sid".into())],
            files: vec![vf],
        };
        let t = parse("t", GOOD, &dir, &inputs).expect("parses");
        assert_eq!(t.sources[0].args["suite"].value, Value::from("sid"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn problems_name_file_line_and_block() {
        let errs = parse_err(
            "build {\n  sources = [\"source.local.x\"]\n  thing \"y\" {}\n}\n",
            &VarInputs::default(),
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("t.pkr.hcl:3: in build: unknown block \"thing\"")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("\"source.local.x\", which is not declared")),
            "{errs:?}"
        );
    }

    #[test]
    fn syntax_errors_carry_the_line() {
        let errs = parse_err("source \"local\" \"x\" {\n  suite = \n}\n", &VarInputs::default());
        assert!(
            errs[0].starts_with("t.pkr.hcl:2: syntax error at column 11"),
            "{errs:?}"
        );
    }

    #[test]
    fn undefined_variables_and_bad_var_flags_are_reported() {
        let text = "variable \"n\" {\n  type = number\n}\nsource \"local\" \"x\" {\n  suite = var.nope\n}\nbuild {\n  sources = [\"source.local.x\"]\n}\n";
        let errs = parse_err(
            text,
            &VarInputs {
                vars: vec![("n".into(), "many".into()), ("other".into(), "1".into())],
                files: vec![],
            },
        );
        let all = errs.join("\n");
        assert!(all.contains("\"many\" is not a number"), "{all}");
        assert!(all.contains("declares no variable \"other\""), "{all}");
        assert!(
            all.contains("t.pkr.hcl:5: in source \"local\" \"x\": argument \"suite\""),
            "{all}"
        );
    }

    #[test]
    fn missing_values_say_how_to_give_them() {
        let text = "variable \"region\" {\n  type = string\n}\nbuild {\n  sources = []\n}\n";
        let errs = parse_err(text, &VarInputs::default());
        assert!(errs[0].contains("pass -var region=VALUE"), "{errs:?}");
    }

    #[test]
    fn arg_reader_flags_unknown_and_mistyped_arguments() {
        let t = parse_ok(GOOD);
        let src = &t.sources[0];
        let mut r = ArgReader::new("t", "source", src.line, &src.args);
        assert_eq!(r.string("suite").as_deref(), Some("bookworm"));
        assert!(r.finish().is_empty());
        let step = &t.build.steps[1];
        let mut r = ArgReader::new("t", step.block_name(), step.line, &step.args);
        let _ = r.strings("accounting");
        let problems = r.finish();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].to_string().contains("accounting must be a list"),
            "{problems:?}"
        );
    }
}
