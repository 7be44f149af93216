//! Where each field of each NACHA record is: one table the writer and the validator
//! share. Positions are 1-based and inclusive, as the NACHA rules (and moov-io/ach's
//! `fileHeader.go`, `batchHeader.go`, `entryDetail.go`, `addenda05.go`,
//! `batchControl.go`, `fileControl.go`) give them.

use serde::Serialize;

/// The length of every record, without its line ending.
pub const RECORD_LEN: usize = 94;
/// Records per block: a file's line count is a multiple of this.
pub const BLOCKING_FACTOR: usize = 10;

/// A field of a record: its name and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Field {
    /// The name, as moov-io/ach and most bank guides call it.
    pub name: &'static str,
    /// First position, from 1.
    pub start: usize,
    /// Last position, inclusive.
    pub end: usize,
}

impl Field {
    const fn new(name: &'static str, start: usize, end: usize) -> Field {
        Field { name, start, end }
    }

    /// Its length in characters.
    pub const fn len(&self) -> usize {
        self.end - self.start + 1
    }

    /// Whether it is empty (never: every field has at least one position).
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Its bytes in a record of [`RECORD_LEN`] bytes.
    #[inline]
    pub fn of<'a>(&self, record: &'a [u8]) -> &'a [u8] {
        &record[self.start - 1..self.end]
    }
}

/// The fields of one kind of record, in order, covering positions 1-94.
pub type Fields = &'static [Field];

macro_rules! fields {
    ($mod:ident, $doc:literal, $all:ident; $($konst:ident = $name:literal, $s:literal, $e:literal;)*) => {
        #[doc = $doc]
        pub mod $mod {
            use super::Field;
            $(
                #[doc = concat!("`", $name, "`, positions ", $s, "-", $e, ".")]
                pub const $konst: Field = Field::new($name, $s, $e);
            )*
            /// Every field of the record, in order.
            pub const $all: &[Field] = &[$($konst),*];
        }
    };
}

fields!(file_header, "The file header record (type 1).", ALL;
    RECORD_TYPE = "record type code", 1, 1;
    PRIORITY = "priority code", 2, 3;
    DESTINATION = "immediate destination", 4, 13;
    ORIGIN = "immediate origin", 14, 23;
    CREATION_DATE = "file creation date", 24, 29;
    CREATION_TIME = "file creation time", 30, 33;
    ID_MODIFIER = "file ID modifier", 34, 34;
    RECORD_SIZE = "record size", 35, 37;
    BLOCKING = "blocking factor", 38, 39;
    FORMAT = "format code", 40, 40;
    DESTINATION_NAME = "immediate destination name", 41, 63;
    ORIGIN_NAME = "immediate origin name", 64, 86;
    REFERENCE = "reference code", 87, 94;
);

fields!(batch_header, "The batch header record (type 5).", ALL;
    RECORD_TYPE = "record type code", 1, 1;
    SERVICE_CLASS = "service class code", 2, 4;
    COMPANY_NAME = "company name", 5, 20;
    DISCRETIONARY = "company discretionary data", 21, 40;
    COMPANY_ID = "company identification", 41, 50;
    SEC = "standard entry class code", 51, 53;
    DESCRIPTION = "company entry description", 54, 63;
    DESCRIPTIVE_DATE = "company descriptive date", 64, 69;
    EFFECTIVE_DATE = "effective entry date", 70, 75;
    SETTLEMENT_DATE = "settlement date", 76, 78;
    ORIGINATOR_STATUS = "originator status code", 79, 79;
    ODFI = "originating DFI identification", 80, 87;
    BATCH_NUMBER = "batch number", 88, 94;
);

fields!(entry_detail, "The entry detail record (type 6).", ALL;
    RECORD_TYPE = "record type code", 1, 1;
    TRANSACTION_CODE = "transaction code", 2, 3;
    RDFI = "receiving DFI identification", 4, 11;
    CHECK_DIGIT = "check digit", 12, 12;
    ACCOUNT = "DFI account number", 13, 29;
    AMOUNT = "amount", 30, 39;
    INDIVIDUAL_ID = "individual identification number", 40, 54;
    INDIVIDUAL_NAME = "individual name", 55, 76;
    DISCRETIONARY = "discretionary data", 77, 78;
    ADDENDA_INDICATOR = "addenda record indicator", 79, 79;
    TRACE = "trace number", 80, 94;
);

fields!(addenda05, "The addenda record of type 05 (type 7).", ALL;
    RECORD_TYPE = "record type code", 1, 1;
    TYPE_CODE = "addenda type code", 2, 3;
    PAYMENT_INFO = "payment related information", 4, 83;
    SEQUENCE = "addenda sequence number", 84, 87;
    ENTRY_SEQUENCE = "entry detail sequence number", 88, 94;
);

fields!(batch_control, "The batch control record (type 8).", ALL;
    RECORD_TYPE = "record type code", 1, 1;
    SERVICE_CLASS = "service class code", 2, 4;
    COUNT = "entry/addenda count", 5, 10;
    HASH = "entry hash", 11, 20;
    DEBITS = "total debit entry dollar amount", 21, 32;
    CREDITS = "total credit entry dollar amount", 33, 44;
    COMPANY_ID = "company identification", 45, 54;
    MAC = "message authentication code", 55, 73;
    RESERVED = "reserved", 74, 79;
    ODFI = "originating DFI identification", 80, 87;
    BATCH_NUMBER = "batch number", 88, 94;
);

fields!(file_control, "The file control record (type 9).", ALL;
    RECORD_TYPE = "record type code", 1, 1;
    BATCH_COUNT = "batch count", 2, 7;
    BLOCK_COUNT = "block count", 8, 13;
    COUNT = "entry/addenda count", 14, 21;
    HASH = "entry hash", 22, 31;
    DEBITS = "total debit entry dollar amount", 32, 43;
    CREDITS = "total credit entry dollar amount", 44, 55;
    RESERVED = "reserved", 56, 94;
);

/// The field of `fields` at a 1-based position.
pub fn field_at(fields: Fields, position: usize) -> Field {
    fields
        .iter()
        .copied()
        .find(|f| f.start <= position && position <= f.end)
        .unwrap_or(Field::new("record", 1, RECORD_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_covers_94_positions_without_gaps() {
        for all in [
            file_header::ALL,
            batch_header::ALL,
            entry_detail::ALL,
            addenda05::ALL,
            batch_control::ALL,
            file_control::ALL,
        ] {
            let mut next = 1;
            for f in all {
                assert_eq!(f.start, next, "{}", f.name);
                next = f.end + 1;
            }
            assert_eq!(next, RECORD_LEN + 1);
        }
    }
}
