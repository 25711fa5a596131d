//! The stored vocabularies' one declaration, the `named!` macro, in a module
//! of its own: every domain that keeps a typed name (a build's status, a
//! role, a notification's channel) declares it with `crate::named!`, which
//! names nothing else of the store.

/// A typed value with a stored name, written once: `ALL` (in the order
/// given), `as_str`, `Display`, and `FromStr`, whose error `$unknown` (a
/// tuple struct of the text, declared beside the type with its own message)
/// carries the unknown name cut at 64 characters; read from the database
/// through [`stored_by_name!`](crate::stored_by_name).
#[macro_export]
#[doc(hidden)]
macro_rules! named {
    ($type:ident, $unknown:ident, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $type {
            pub const ALL: [$type; [$($name),+].len()] = [$($type::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($type::$variant => $name,)+
                }
            }
        }

        impl ::std::fmt::Display for $type {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $type {
            type Err = $unknown;

            fn from_str(value: &str) -> Result<Self, Self::Err> {
                $type::ALL
                    .into_iter()
                    .find(|known| known.as_str() == value)
                    .ok_or_else(|| $unknown(value.chars().take(64).collect()))
            }
        }

        $crate::stored_by_name!($type);
    };
}
