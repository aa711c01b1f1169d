//! The syntax tree of a file as JSON (`dygram debug`): what the parser read, before names are
//! linked, for looking at how a program was understood.
//!
//! Every part of the tree is an object whose `$type` names it (`Program`, `Import`,
//! `ImportSymbol`, `Header`, `Node`, `Attribute`, `Edge`, `Segment`, `Arrow`, `Annotation`,
//! `Parameters`, `Parameter`, `LabelPair`, `LabelFlag`, `LabelText`, `TypeName`, `LiteralUnion`,
//! `ObjectValue`, `ArrayValue`, `Primitive`, `QualifiedName`), followed by its fields; names
//! are written as text (`Group.Step`), string literals by their value. With
//! [`TreeOptions::text_regions`] each part also has `$textRegion`: where it was written, as
//! `offset`, `end` and `length` in UTF-16 code units from the start of the text and a `range` of
//! 0-based `line` and `character` positions (the units of `$sourceRange` in the canonical JSON).
//! With [`TreeOptions::source_text`] the root has `$sourceText`, the whole text.

use serde_json::{Map, Value as Json, json};

use dygram_syntax::ast::{
    Annotation, AnnotationArg, Arrow, ArrowKind, Attribute, Edge, Header, Import, Item, LabelItem,
    Node, Primitive, Program, QName, Segment, TypeDef, Value,
};
use dygram_syntax::source::{SourceFile, Span};

/// What the tree carries besides its parts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeOptions {
    /// `$textRegion` on every part: where it was written.
    pub text_regions: bool,
    /// `$sourceText` on the root: the whole text.
    pub source_text: bool,
}

/// The syntax tree `program`, parsed from `file`, as JSON.
pub fn to_json(program: &Program, file: &SourceFile, options: TreeOptions) -> Json {
    let tree = Tree { file, options };
    let mut root = tree.program(program);
    if options.source_text
        && let Json::Object(o) = &mut root
    {
        o.insert("$sourceText".into(), json!(file.text()));
    }
    root
}

struct Tree<'a> {
    file: &'a SourceFile,
    options: TreeOptions,
}

impl Tree<'_> {
    /// A part: its `$type`, its fields (those that are `None` left out), and where it was written.
    fn part(&self, ty: &str, span: Option<Span>, fields: Vec<(&str, Option<Json>)>) -> Json {
        let mut o = Map::new();
        o.insert("$type".into(), json!(ty));
        for (name, value) in fields {
            if let Some(value) = value {
                o.insert(name.into(), value);
            }
        }
        if let Some(span) = span.filter(|_| self.options.text_regions) {
            o.insert("$textRegion".into(), self.region(span));
        }
        Json::Object(o)
    }

    fn region(&self, span: Span) -> Json {
        let start = self.file.position(span.start as usize);
        let end = self.file.position(span.end as usize);
        json!({
            "offset": start.offset,
            "end": end.offset,
            "length": end.offset.saturating_sub(start.offset),
            "range": {
                "start": {"line": start.line, "character": start.character},
                "end": {"line": end.line, "character": end.character},
            },
        })
    }

    fn list<T>(&self, items: &[T], each: impl Fn(&Self, &T) -> Json) -> Option<Json> {
        Some(Json::Array(items.iter().map(|i| each(self, i)).collect()))
    }

    fn program(&self, p: &Program) -> Json {
        let whole = Span::new(0, self.file.text().len());
        self.part(
            "Program",
            Some(whole),
            vec![
                ("imports", self.list(&p.imports, Self::import)),
                ("header", p.header.as_ref().map(|h| self.header(h))),
                ("items", self.list(&p.items, Self::item)),
            ],
        )
    }

    fn import(&self, i: &Import) -> Json {
        let symbols = i.symbols.iter().map(|s| {
            self.part(
                "ImportSymbol",
                Some(s.span),
                vec![
                    ("name", Some(json!(s.name.text()))),
                    ("alias", s.alias.as_ref().map(|a| json!(a.text))),
                ],
            )
        });
        self.part(
            "Import",
            Some(i.span),
            vec![
                ("symbols", Some(Json::Array(symbols.collect()))),
                ("path", Some(json!(i.path.value))),
            ],
        )
    }

    fn header(&self, h: &Header) -> Json {
        self.part(
            "Header",
            Some(h.span),
            vec![
                ("title", Some(json!(h.title.value))),
                ("annotations", self.list(&h.annotations, Self::annotation)),
                ("attributes", self.list(&h.attributes, Self::attribute)),
            ],
        )
    }

    fn item(&self, item: &Item) -> Json {
        match item {
            Item::Node(n) => self.node(n),
            Item::Edge(e) => self.edge(e),
            Item::Attribute(a) => self.attribute(a),
        }
    }

    fn node(&self, n: &Node) -> Json {
        self.part(
            "Node",
            Some(n.span),
            vec![
                ("kind", n.kind.as_ref().map(|k| json!(k.text))),
                ("name", Some(json!(n.name.text()))),
                ("title", n.title.as_ref().map(|t| json!(t.value))),
                ("annotations", self.list(&n.annotations, Self::annotation)),
                (
                    "items",
                    n.has_block
                        .then(|| self.list(&n.items, Self::item))
                        .flatten(),
                ),
            ],
        )
    }

    fn attribute(&self, a: &Attribute) -> Json {
        self.part(
            "Attribute",
            Some(a.span),
            vec![
                ("name", Some(json!(a.name.text))),
                ("type", a.ty.as_ref().map(|t| self.type_def(t))),
                ("value", a.value.as_ref().map(|v| self.value(v))),
            ],
        )
    }

    fn type_def(&self, t: &TypeDef) -> Json {
        match t {
            TypeDef::Named {
                name,
                generics,
                optional,
                span,
            } => self.part(
                "TypeName",
                Some(*span),
                vec![
                    ("name", Some(json!(name.text()))),
                    ("generics", self.list(generics, Self::type_def)),
                    ("optional", Some(json!(optional))),
                ],
            ),
            TypeDef::Union { literals, span } => {
                let values: Vec<&str> = literals.iter().map(|l| l.value.as_str()).collect();
                self.part(
                    "LiteralUnion",
                    Some(*span),
                    vec![("literals", Some(json!(values)))],
                )
            }
        }
    }

    fn value(&self, v: &Value) -> Json {
        match v {
            Value::Object(attributes, span) => self.part(
                "ObjectValue",
                Some(*span),
                vec![("attributes", self.list(attributes, Self::attribute))],
            ),
            Value::Array(values, span) => self.part(
                "ArrayValue",
                Some(*span),
                vec![("values", self.list(values, Self::value))],
            ),
            Value::Primitive(p) => self.primitive(p),
        }
    }

    fn primitive(&self, p: &Primitive) -> Json {
        let (kind, value) = match p {
            Primitive::Str(s) => ("string", s.value.as_str()),
            Primitive::Ident(text, _) => ("name", text.as_str()),
            Primitive::Number(text, _) => ("number", text.as_str()),
            Primitive::ExtId(text, _) => ("external", text.as_str()),
        };
        self.part(
            "Primitive",
            Some(p.span()),
            vec![
                ("kind", Some(json!(kind))),
                ("raw", Some(json!(p.raw()))),
                ("value", Some(json!(value))),
            ],
        )
    }

    fn qualified(&self, q: &QName) -> Json {
        self.part(
            "QualifiedName",
            Some(q.span),
            vec![("name", Some(json!(q.text())))],
        )
    }

    fn annotation(&self, a: &Annotation) -> Json {
        let argument = a.arg.as_ref().map(|arg| match arg {
            AnnotationArg::Value(p) => self.primitive(p),
            AnnotationArg::QName(q) => self.qualified(q),
            AnnotationArg::Params(params) => {
                let span = params
                    .first()
                    .zip(params.last())
                    .map(|(first, last)| first.span.to(last.span));
                let params = params.iter().map(|p| {
                    self.part(
                        "Parameter",
                        Some(p.span),
                        vec![
                            ("name", Some(json!(p.name.text))),
                            ("value", p.value.as_ref().map(|v| self.primitive(v))),
                        ],
                    )
                });
                self.part(
                    "Parameters",
                    span,
                    vec![("params", Some(Json::Array(params.collect())))],
                )
            }
        });
        self.part(
            "Annotation",
            Some(a.span),
            vec![("name", Some(json!(a.name.text))), ("argument", argument)],
        )
    }

    fn edge(&self, e: &Edge) -> Json {
        let sources: Vec<String> = e.sources.iter().map(QName::text).collect();
        self.part(
            "Edge",
            Some(e.span),
            vec![
                ("sources", Some(json!(sources))),
                ("segments", self.list(&e.segments, Self::segment)),
                ("attributes", self.list(&e.attributes, Self::attribute)),
            ],
        )
    }

    fn segment(&self, s: &Segment) -> Json {
        let targets: Vec<String> = s.targets.iter().map(QName::text).collect();
        let labels = s
            .labels
            .iter()
            .map(|group| Json::Array(group.iter().map(|i| self.label_item(i)).collect()));
        let multiplicity =
            |m: &Option<dygram_syntax::ast::StrLit>| m.as_ref().map(|m| json!(m.value));
        self.part(
            "Segment",
            Some(s.span),
            vec![
                ("arrow", Some(self.arrow(&s.arrow))),
                ("labels", Some(Json::Array(labels.collect()))),
                ("source_multiplicity", multiplicity(&s.source_multiplicity)),
                ("target_multiplicity", multiplicity(&s.target_multiplicity)),
                ("targets", Some(json!(targets))),
            ],
        )
    }

    fn arrow(&self, a: &Arrow) -> Json {
        let kind = match a.kind {
            ArrowKind::Single => "single",
            ArrowKind::Double => "double",
            ArrowKind::Fat => "fat",
            ArrowKind::Bidirectional => "bidirectional",
            ArrowKind::BidirectionalLabeled => "bidirectional_labeled",
            ArrowKind::Inherit => "inherit",
            ArrowKind::Compose => "compose",
            ArrowKind::Aggregate => "aggregate",
        };
        self.part(
            "Arrow",
            Some(a.span),
            vec![("kind", Some(json!(kind))), ("text", Some(json!(a.text)))],
        )
    }

    fn label_item(&self, item: &LabelItem) -> Json {
        match item {
            LabelItem::Annotation(a) => self.annotation(a),
            LabelItem::Pair { name, value, span } => self.part(
                "LabelPair",
                Some(*span),
                vec![
                    ("name", Some(json!(name.text))),
                    ("value", Some(self.primitive(value))),
                ],
            ),
            LabelItem::Flag { name, span } => self.part(
                "LabelFlag",
                Some(*span),
                vec![("name", Some(json!(name.text)))],
            ),
            LabelItem::Text(p) => self.part(
                "LabelText",
                Some(p.span()),
                vec![("value", Some(self.primitive(p)))],
            ),
        }
    }
}
