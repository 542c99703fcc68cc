"""crate-harness: run GUI agents on Android over ADB and judge them while they run."""
__version__ = "0.1.0"
