"""Forms a server asks for: the schema read into fields, secrets spotted, answers checked and described."""

from __future__ import annotations

import pytest

from bot.forms import (
    FieldError,
    Form,
    FormError,
    FormField,
    check_answer,
    describe_field,
    form_from_schema,
    parse_field,
    secret_fields,
)

# Every primitive the 2025-11-25 schema allows, in one form.
PIZZA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2, "maxLength": 20},
        "email": {"type": "string", "format": "email", "description": "For the receipt"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 2},
        "tip": {"type": "number", "minimum": 0},
        "extra_cheese": {"type": "boolean", "default": False},
        "crust": {"type": "string", "enum": ["thin", "thick"], "default": "thin"},
        "sauce": {"type": "string", "enum": ["r", "w"], "enumNames": ["Red", "White"]},
        "drink": {
            "type": "string",
            "oneOf": [{"const": "cola", "title": "Cola"}, {"const": "water", "title": "Still water"}],
        },
        "side": {"type": "string", "anyOf": [{"const": "fries", "title": "Fries"}]},
        "toppings": {
            "type": "array",
            "items": {"type": "string", "enum": ["ham", "olives", "basil"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["ham"],
        },
        "dips": {
            "type": "array",
            "items": {"anyOf": [{"const": "bbq", "title": "Barbecue"}, {"const": "mayo", "title": "Mayo"}]},
        },
    },
    "required": ["name", "size", "crust", "toppings"],
}


def field(form: Form, name: str) -> FormField:
    return next(f for f in form.fields if f.name == name)


# --- reading the schema -------------------------------------------------------------------------


def test_every_kind_is_read_in_property_order() -> None:
    form = form_from_schema(PIZZA)
    assert [f.name for f in form.fields] == list(PIZZA["properties"])
    kinds = {f.name: f.kind for f in form.fields}
    assert kinds == {
        "name": "text",
        "email": "email",
        "site": "uri",
        "day": "date",
        "at": "date-time",
        "size": "integer",
        "tip": "number",
        "extra_cheese": "boolean",
        "crust": "choice",
        "sauce": "choice",
        "drink": "choice",
        "side": "choice",
        "toppings": "choices",
        "dips": "choices",
    }
    assert [f.name for f in form.fields if f.required] == ["name", "size", "crust", "toppings"]


def test_titles_descriptions_limits_and_options() -> None:
    form = form_from_schema(PIZZA)
    name = field(form, "name")
    assert (name.title, name.min_length, name.max_length) == ("Your name", 2, 20)
    assert field(form, "email").title == "email"
    assert field(form, "email").description == "For the receipt"
    assert (field(form, "size").minimum, field(form, "size").maximum) == (1, 10)
    assert (field(form, "tip").minimum, field(form, "tip").maximum) == (0, None)
    assert field(form, "crust").options == (("thin", "thin"), ("thick", "thick"))
    assert field(form, "sauce").options == (("r", "Red"), ("w", "White"))
    assert field(form, "drink").options == (("cola", "Cola"), ("water", "Still water"))
    assert field(form, "side").options == (("fries", "Fries"),)
    toppings = field(form, "toppings")
    assert (toppings.min_items, toppings.max_items) == (1, 2)
    assert field(form, "dips").options == (("bbq", "Barbecue"), ("mayo", "Mayo"))


def test_valid_defaults_are_kept() -> None:
    form = form_from_schema(PIZZA)
    assert field(form, "size").default == 2
    assert field(form, "extra_cheese").default is False
    assert field(form, "crust").default == "thin"
    assert field(form, "toppings").default == ("ham",)
    assert field(form, "name").default is None


def test_defaults_that_do_not_fit_are_dropped() -> None:
    form = form_from_schema(
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "maximum": 5, "default": 9},
                "c": {"type": "string", "enum": ["a"], "default": "z"},
                "e": {"type": "string", "format": "email", "default": "nope"},
                "b": {"type": "boolean", "default": "maybe"},
                "s": {"type": "string", "default": "hello"},
            },
        }
    )
    assert [f.default for f in form.fields] == [None, None, None, None, "hello"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {}},
        {"type": "object"},
        {"type": "array", "items": {"type": "string"}},
        {
            "type": "object",
            "properties": {"addr": {"type": "object", "properties": {"x": {"type": "string"}}}},
        },
        {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
        {"type": "object", "properties": {"n": {"type": "number", "enum": [1, 2]}}},
        {"type": "object", "properties": {"x": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"x": "string"}},
        {"type": "object", "properties": {"c": {"type": "string", "oneOf": [{"title": "no const"}]}}},
    ],
)
def test_what_cannot_be_shown_is_a_form_error(schema: dict) -> None:
    with pytest.raises(FormError) as caught:
        form_from_schema(schema)
    assert str(caught.value)


# --- secrets ------------------------------------------------------------------------------------


def test_secret_fields_by_name_title_description_format_and_write_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "github_token": {"type": "string"},
            "key": {"type": "string", "title": "API Key"},
            "accessToken": {"type": "string"},
            "apikey": {"type": "string"},
            "pw": {"type": "string", "format": "password"},
            "hidden": {"type": "string", "writeOnly": True},
            "code": {"type": "string", "description": "The PIN of your card"},
            "user_ssn": {"type": "string"},
            "number": {"type": "string", "title": "Credit card number"},
            "cvv2": {"type": "string"},
            "pass": {"type": "string", "title": "Passcode"},
            "creds": {"type": "string", "description": "Your AWS credentials"},
            "pem": {"type": "string", "title": "Private key"},
            "clientSecret": {"type": "string"},
            "tokenizer_name": {"type": "string"},
            "spinach": {"type": "boolean"},
            "max_tokens": {"type": "integer"},
            "secretary": {"type": "string"},
            "pinned": {"type": "boolean"},
            "name": {"type": "string", "description": "What to call you"},
        },
    }
    assert secret_fields(schema) == (
        "github_token",
        "key",
        "accessToken",
        "apikey",
        "pw",
        "hidden",
        "code",
        "user_ssn",
        "number",
        "cvv2",
        "pass",
        "creds",
        "pem",
        "clientSecret",
    )
    assert secret_fields(PIZZA) == ()
    assert secret_fields({"type": "object"}) == ()


# --- one typed answer ---------------------------------------------------------------------------


def test_parse_field_empty_text_is_the_default() -> None:
    form = form_from_schema(PIZZA)
    assert parse_field(field(form, "size"), "  ") == 2
    assert parse_field(field(form, "name"), "") is None
    assert parse_field(field(form, "toppings"), "") == ("ham",)


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("name", "  Ada ", "Ada"),
        ("email", "ada@example.com", "ada@example.com"),
        ("site", "https://example.com/x?y=1", "https://example.com/x?y=1"),
        ("day", "2026-12-31", "2026-12-31"),
        ("at", "2026-12-31T18:30:00Z", "2026-12-31T18:30:00Z"),
        ("at", "2026-12-31 18:30+01:00", "2026-12-31T18:30:00+01:00"),
        ("at", "2026-12-31t18:30:15.5z", "2026-12-31T18:30:15.5Z"),
        ("size", "7", 7),
        ("size", "3.0", 3),
        ("tip", "2.5", 2.5),
        ("tip", "4", 4),
        ("extra_cheese", "YES", True),
        ("extra_cheese", "n", False),
        ("extra_cheese", "0", False),
        ("crust", "THICK", "thick"),
        ("sauce", "white", "w"),
        ("sauce", "r", "r"),
        ("drink", "still WATER", "water"),
        ("toppings", "ham, Basil", ("ham", "basil")),
        ("toppings", "olives,olives", ("olives",)),
    ],
)
def test_parse_field_accepts(name: str, text: str, value: object) -> None:
    got = parse_field(field(form_from_schema(PIZZA), name), text)
    assert got == value
    assert type(got) is type(value)


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("name", "A", "at least 2 characters"),
        ("name", "x" * 21, "at most 20 characters"),
        ("email", "ada@", "email address"),
        ("site", "example.com", "scheme and host"),
        ("site", "https://", "scheme and host"),
        ("day", "31/12/2026", "YYYY-MM-DD"),
        ("day", "2026-02-30", "YYYY-MM-DD"),
        ("at", "2026-12-31T18:30:00", "time zone"),
        ("at", "2026-12-31T25:00Z", "time zone"),
        ("size", "eleven", "a whole number from 1 to 10"),
        ("size", "11", "a whole number from 1 to 10"),
        ("size", "2.5", "a whole number"),
        ("tip", "-1", "a number of at least 0"),
        ("tip", "nan", "a number"),
        ("extra_cheese", "maybe", "yes or no"),
        ("crust", "deep", "one of: thin, thick"),
        ("toppings", "ham, olives, basil", "at most 2"),
        ("toppings", "ham, pineapple", "pineapple"),
    ],
)
def test_parse_field_refuses_with_a_message(name: str, text: str, says: str) -> None:
    with pytest.raises(FieldError) as caught:
        parse_field(field(form_from_schema(PIZZA), name), text)
    assert says in str(caught.value)


# --- a whole submitted form ---------------------------------------------------------------------


def test_check_answer_converts_what_surfaces_send() -> None:
    form = form_from_schema(PIZZA)
    content, errors = check_answer(
        form,
        {
            "name": "Ada",
            "email": "",
            "size": "3",
            "tip": 1.5,
            "extra_cheese": True,
            "crust": "Thick",
            "sauce": ["w"],
            "toppings": ["ham", "basil"],
            "dips": [],
            "not_a_field": "ignored",
        },
    )
    assert errors == {}
    assert content == {
        "name": "Ada",
        "size": 3,
        "tip": 1.5,
        "extra_cheese": True,
        "crust": "thick",
        "sauce": "w",
        "toppings": ["ham", "basil"],
    }


def test_check_answer_takes_its_own_output_again() -> None:
    form = form_from_schema(PIZZA)
    first, _ = check_answer(
        form, {"name": "Ada", "size": 10, "crust": "thin", "toppings": "olives", "at": "2026-01-01 09:00Z"}
    )
    assert first is not None
    assert check_answer(form, first) == (first, {})


def test_check_answer_lists_every_bad_field() -> None:
    form = form_from_schema(PIZZA)
    content, errors = check_answer(
        form,
        {
            "name": "",
            "email": "not an email",
            "size": 0,
            "extra_cheese": "perhaps",
            "crust": "deep",
            "toppings": ["ham", "olives", "basil"],
            "tip": True,
        },
    )
    assert content is None
    assert set(errors) == {"name", "email", "size", "extra_cheese", "crust", "toppings", "tip"}
    assert "required" in errors["name"]
    assert "from 1 to 10" in errors["size"]
    assert all(message and message[0].isupper() for message in errors.values())


def test_check_answer_does_not_fill_defaults_in() -> None:
    form = form_from_schema(PIZZA)
    content, errors = check_answer(form, {"name": "Ada", "crust": "thin", "toppings": ["ham"]})
    assert content is None
    assert set(errors) == {"size"}


# --- hints --------------------------------------------------------------------------------------


def test_describe_field() -> None:
    form = form_from_schema(PIZZA)
    hints = {f.name: describe_field(f) for f in form.fields}
    assert hints == {
        "name": "text, 2 to 20 characters",
        "email": "an email address",
        "site": "a link like https://example.com",
        "day": "a date like 2026-12-31",
        "at": "a date and time like 2026-12-31T18:30:00Z",
        "size": "a whole number from 1 to 10",
        "tip": "a number of at least 0",
        "extra_cheese": "yes or no",
        "crust": "one of: thin, thick",
        "sauce": "one of: Red, White",
        "drink": "one of: Cola, Still water",
        "side": "one of: Fries",
        "toppings": "up to 2 of: ham, olives, basil",
        "dips": "one or more of: Barbecue, Mayo",
    }
    plain = FormField(name="x", title="x", kind="text")
    assert describe_field(plain) == "any text"
    many = FormField(name="x", title="x", kind="choice", options=tuple((str(i), str(i)) for i in range(20)))
    assert describe_field(many).endswith("… (20 in all)")
