"""The simulated phone's apps, in launcher order."""

from harness.sim.apps.clock import Clock
from harness.sim.apps.contacts import Contacts
from harness.sim.apps.files import Files
from harness.sim.apps.messages import Messages
from harness.sim.apps.notes import Notes
from harness.sim.apps.settings import Settings
from harness.sim.apps.shop import Shop
from harness.sim.apps.wallet import Wallet

APP_CLASSES = [Settings, Contacts, Messages, Clock, Notes, Files, Wallet, Shop]
