//! Column definitions and text-protocol rows, for the few responses Sluice reads or
//! changes value by value (the rest pass through as bytes).

use crate::lenenc::{put_lenenc_bytes, Reader};
use crate::ProtocolError;
use bytes::{BufMut, BytesMut};

/// A column definition packet (Protocol::ColumnDefinition41): its names and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnDef<'a> {
    pub schema: &'a [u8],
    pub table: &'a [u8],
    pub org_table: &'a [u8],
    pub name: &'a [u8],
    pub org_name: &'a [u8],
    /// The collation id of the values (63: binary).
    pub charset: u16,
    /// The `MYSQL_TYPE_*` byte.
    pub column_type: u8,
}

impl<'a> ColumnDef<'a> {
    /// `extended_metadata`: the connection negotiated MariaDB's extended metadata
    /// (`MARIADB_CLIENT_EXTENDED_METADATA`), which puts a length-encoded string of
    /// type details (`json`, `uuid`...) between the names and the fixed fields.
    pub fn parse(
        payload: &'a [u8],
        extended_metadata: bool,
    ) -> Result<ColumnDef<'a>, ProtocolError> {
        let mut r = Reader::new(payload);
        r.lenenc_bytes("column catalog")?;
        let schema = r.lenenc_bytes("column schema")?;
        let table = r.lenenc_bytes("column table")?;
        let org_table = r.lenenc_bytes("column org_table")?;
        let name = r.lenenc_bytes("column name")?;
        let org_name = r.lenenc_bytes("column org_name")?;
        if extended_metadata {
            r.lenenc_bytes("column extended metadata")?;
        }
        r.lenenc_int("fixed fields length")?;
        let charset = r.u16("character set")?;
        r.u32("column length")?;
        Ok(ColumnDef {
            schema,
            table,
            org_table,
            name,
            org_name,
            charset,
            column_type: r.u8("column type")?,
        })
    }
}

/// NULL in a text row.
const NULL: u8 = 0xfb;

/// The values of a text-protocol row (`None` for SQL NULL).
pub fn text_values(payload: &[u8]) -> Result<Vec<Option<&[u8]>>, ProtocolError> {
    let mut r = Reader::new(payload);
    let mut values = Vec::new();
    while !r.is_empty() {
        if payload[payload.len() - r.remaining()] == NULL {
            r.u8("NULL")?;
            values.push(None);
        } else {
            values.push(Some(r.lenenc_bytes("row value")?));
        }
    }
    Ok(values)
}

/// A text-protocol row payload from its values.
pub fn text_row(values: &[Option<&[u8]>]) -> BytesMut {
    let mut out =
        BytesMut::with_capacity(values.iter().map(|v| 9 + v.map_or(0, <[u8]>::len)).sum());
    for value in values {
        match value {
            Some(v) => put_lenenc_bytes(&mut out, v),
            None => out.put_u8(NULL),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lenenc::put_lenenc_bytes;

    #[test]
    fn column_definitions_parse() {
        let mut def = BytesMut::new();
        for part in ["def", "information_schema", "p", "PROCESSLIST", "x", "ID"] {
            put_lenenc_bytes(&mut def, part.as_bytes());
        }
        def.extend_from_slice(&[0x0c, 63, 0, 21, 0, 0, 0, 8, 0x81, 0, 0, 0, 0]);
        let column = ColumnDef::parse(&def, false).unwrap();
        assert_eq!(column.org_table, b"PROCESSLIST");
        assert_eq!(column.name, b"x");
        assert_eq!(column.org_name, b"ID");
        assert_eq!(column.column_type, 8);
        assert!(ColumnDef::parse(&def[..10], false).is_err());
    }

    /// With MariaDB's extended metadata, a string of type details follows the names:
    /// read as a fixed-fields length, its length byte made every later field wrong
    /// (a VARCHAR read as a DECIMAL).
    #[test]
    fn column_definitions_with_extended_metadata_parse() {
        let fixed = [0x0c, 45, 0, 0x90, 1, 0, 0, 253, 0, 0, 0x27, 0, 0];
        for details in [&b""[..], b"\x00\x04json", b"\x01\x04uuid"] {
            let mut def = BytesMut::new();
            for part in ["def", "", "", "", "@a", ""] {
                put_lenenc_bytes(&mut def, part.as_bytes());
            }
            put_lenenc_bytes(&mut def, details);
            def.extend_from_slice(&fixed);
            let column = ColumnDef::parse(&def, true).unwrap();
            assert_eq!(column.name, b"@a");
            assert_eq!(column.charset, 45);
            assert_eq!(column.column_type, 253);
            assert_ne!(ColumnDef::parse(&def, false).ok(), Some(column));
        }
    }

    #[test]
    fn text_rows_round_trip() {
        let long = vec![b'a'; 300];
        let values: Vec<Option<&[u8]>> = vec![Some(b"12"), None, Some(b""), Some(&long)];
        let row = text_row(&values);
        assert_eq!(text_values(&row).unwrap(), values);
        assert!(text_values(&row[..row.len() - 1]).is_err());
        assert_eq!(text_values(&[]).unwrap(), Vec::<Option<&[u8]>>::new());
    }
}
