from tests.support.world import world as world
