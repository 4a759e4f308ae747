"""numpy golden models, bit-exact with the RTL, and float references."""
