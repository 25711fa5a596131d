//! The provider's whole schema (provider, resources, data sources) against
//! the checked-in `schema.txt`: a change to any attribute, its type, its
//! constraint, its description or a schema version shows here.
//! `ABODE_UPDATE_SCHEMA=1 cargo nextest run -p abode-provider --test schema`
//! writes the file anew after an intended change.

use std::collections::BTreeMap;
use std::fmt::Write;

use abode_provider::AbodeProvider;
use tf_provider::schema::{Block, NestedBlock, Schema};
use tf_provider::{Diagnostics, Provider};

fn dump_block(out: &mut String, indent: usize, block: &Block) {
    let pad = " ".repeat(indent);
    let _ = writeln!(
        out,
        "{pad}block version {} deprecated {}",
        block.version, block.deprecated
    );
    let _ = writeln!(
        out,
        "{pad}description ({:?}) {:?}",
        block.description.kind, block.description.content
    );
    let attributes: BTreeMap<_, _> = block.attributes.iter().collect();
    for (name, attribute) in attributes {
        let _ = writeln!(
            out,
            "{pad}attribute {name}: {} {:?} sensitive {} deprecated {}",
            attribute.attr_type, attribute.constraint, attribute.sensitive, attribute.deprecated
        );
        let _ = writeln!(
            out,
            "{pad}  description ({:?}) {:?}",
            attribute.description.kind, attribute.description.content
        );
    }
    let blocks: BTreeMap<_, _> = block.blocks.iter().collect();
    for (name, nested) in blocks {
        let (mode, inner) = match nested {
            NestedBlock::Single(inner) => ("single", inner),
            NestedBlock::List(inner) => ("list", inner),
            NestedBlock::Set(inner) => ("set", inner),
            NestedBlock::Map(inner) => ("map", inner),
            NestedBlock::Group(inner) => ("group", inner),
            NestedBlock::Optional(inner) => ("optional", inner),
        };
        let _ = writeln!(out, "{pad}nested {name} ({mode})");
        dump_block(out, indent + 4, inner);
    }
}

fn dump_schema(out: &mut String, title: &str, schema: Option<Schema>) {
    let _ = writeln!(out, "{title}");
    match schema {
        Some(schema) => {
            let _ = writeln!(out, "  schema version {}", schema.version);
            dump_block(out, 2, &schema.block);
        }
        None => {
            let _ = writeln!(out, "  no schema");
        }
    }
    out.push('\n');
}

fn dump() -> String {
    let provider = AbodeProvider;
    let mut diags = Diagnostics::default();
    let mut out = String::new();
    dump_schema(&mut out, "provider", provider.schema(&mut diags));
    let resources: BTreeMap<_, _> = provider
        .get_resources(&mut diags)
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (name, resource) in resources {
        let schema = resource.schema(&mut diags);
        dump_schema(&mut out, &format!("resource abode_{name}"), schema);
    }
    let data_sources: BTreeMap<_, _> = provider
        .get_data_sources(&mut diags)
        .unwrap_or_default()
        .into_iter()
        .collect();
    for (name, source) in data_sources {
        let schema = source.schema(&mut diags);
        dump_schema(&mut out, &format!("data source abode_{name}"), schema);
    }
    assert!(diags.errors.is_empty(), "{:?}", diags.errors);
    assert!(diags.warnings.is_empty(), "{:?}", diags.warnings);
    out
}

#[test]
fn the_schema_is_the_checked_in_one() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/schema.txt");
    let actual = dump();
    if std::env::var_os("ABODE_UPDATE_SCHEMA").is_some() {
        std::fs::write(path, &actual).expect("write tests/schema.txt");
        return;
    }
    let expected = std::fs::read_to_string(path).expect("read tests/schema.txt");
    assert!(
        actual == expected,
        "the provider's schema changed; diff it against tests/schema.txt (or rewrite the \
         file with ABODE_UPDATE_SCHEMA=1 after an intended change):\n{actual}"
    );
}
