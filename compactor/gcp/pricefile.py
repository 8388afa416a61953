"""The price file a configuration names (`priceFile`), as `python -m compactor prices --refresh --out FILE`
wrote it from the Cloud Billing Catalog API: read with a size bound, parsed strictly (`core.prices.pricing`)."""

from __future__ import annotations

from compactor.core.prices import pricing
from compactor.errors import ConfigError
from compactor.settings.config import Config

# A price file of every machine family in every region is about 100 KiB.
PRICE_FILE_LIMIT = 8 * 1024 * 1024


def for_config(config: Config) -> pricing.PriceTable | None:
    """The configuration's price file, or None for the built-in table."""
    return read(config.price_file) if config.price_file is not None else None


def read(path: str) -> pricing.PriceTable:
    """A price file; one that cannot be read, is too large or does not parse is a ConfigError naming it."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(PRICE_FILE_LIMIT + 1)
    except OSError as error:
        raise ConfigError(f"priceFile {path}: cannot read it: {error.strerror or error}") from error
    if len(data) > PRICE_FILE_LIMIT:
        raise ConfigError(f"priceFile {path} is larger than {PRICE_FILE_LIMIT // 2**20} MiB; is this the right file?")
    return pricing.parse_price_file(data, source=f"priceFile {path}")
