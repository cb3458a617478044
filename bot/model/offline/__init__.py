"""The built-in offline model: picks tools by rules and writes answers from their results."""

from bot.model.offline.model import OfflineModel

__all__ = ["OfflineModel"]
