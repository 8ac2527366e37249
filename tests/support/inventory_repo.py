"""A lab's inventory repository as ccc-manager writes it (ccc-companions.md D.3): the two files it
commits and a git repository to commit them to, for the inventory pillar's tests."""

import subprocess

import yaml

FOLDER = "group_vars/ccc-cluster"
USERS, CONTAINERS = f"{FOLDER}/user-list.yml", f"{FOLDER}/user-containers.yml"
IMAGE = "vicoslab/ccc:base-latest-ubuntu22.04-cuda12.6.1"


def manager_container(stack, email, user):
    """A new container as ccc-manager fills it in (ccc-companions.md D.3)."""
    return {"STACK_NAME": stack, "USER_EMAIL": email, "CONTAINER_IMAGE": IMAGE, "SHM_SIZE": "2GB",
            "FRP_PORTS": {"TCP": [22], "HTTP": [{"port": 6006, "subdomain": user, "pass": f"{user}-tb-pass"}]},
            "EXTRA_ENVS": {"CONDA_PLUGINS_AUTO_ACCEPT_TOS": "yes"}, "INSTALL_PACKAGES": "htop nano"}


BASE_USERS = {
    "ana.novak@example.org": {"USER_EMAIL": "ana.novak@example.org", "USER_FULLNAME": "Ana Novak", "USER_NAME": "ana",
                              "USER_TYPE": "researcher"},
    "bor.kralj@example.org": {"USER_FULLNAME": "Bor Kralj", "USER_NAME": "bor", "USER_TYPE": "researcher",
                              "USER_MENTOR": "Ana Novak"},
}
BASE_CONTAINERS = [manager_container("ana-main", "ana.novak@example.org", "ana"),
                   manager_container("bor-main", "bor.kralj@example.org", "bor")]


class Repo:
    """A lab's inventory repository; ``commit`` writes the two files as ccc-manager does."""

    def __init__(self, path):
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args):
        return subprocess.run(["git", "-C", str(self.path), "-c", "user.name=ccc-manager",
                               "-c", "user.email=manager@example.org", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    def commit(self, users=None, containers=None, raw=None, message="ccc-manager: update"):
        """Write the files (``raw``: {relative path: text}, as written) and commit; the commit id."""
        files = dict(raw or {})
        if users is not None:
            files[USERS] = yaml.safe_dump({"deployment_users": users}, sort_keys=False)
        if containers is not None:
            files[CONTAINERS] = yaml.safe_dump({"deployment_containers": containers}, sort_keys=False)
        for relative, text in files.items():
            path = self.path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if text is None:
                path.unlink()
            else:
                path.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")
